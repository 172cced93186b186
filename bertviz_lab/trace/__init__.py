"""Recording what a BERT model does: hook points, traces, attention analysis, architecture diagrams."""

from bertviz_lab.trace.hooks import HookPoint

__all__ = ["HookPoint"]
