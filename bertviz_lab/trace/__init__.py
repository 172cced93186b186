"""Recording what a BERT model does: hook points (model.hooks, run_with_cache), traces, attention analysis, architecture
diagrams, and the causal tools built on the hook points (logit lens, activation patching)."""

from bertviz_lab.model.hook_points import ActivationCache, HookPoint, hook_points, run_with_cache
from bertviz_lab.trace.attention import (
    attention_rollout,
    attention_shares,
    head_entropy,
    head_mean,
    head_statistics,
    layer_means,
    special_token_masks,
)
from bertviz_lab.trace.diagram import MermaidDiagram, to_graphviz, to_mermaid
from bertviz_lab.trace.hooks import DEFAULT_MAX_BYTES, Trace, trace
from bertviz_lab.trace.interventions import ablate
from bertviz_lab.trace.logit_lens import LayerTop, LogitLens, logit_lens
from bertviz_lab.trace.patching import PatchResult, patch
from bertviz_lab.trace.records import Call, ForwardPass
from bertviz_lab.trace.saliency import saliency
from bertviz_lab.trace.shapes import TensorSpec
from bertviz_lab.trace.storage import TraceSizeError
from bertviz_lab.trace.summary import Summary

__all__ = [
    "DEFAULT_MAX_BYTES", "ActivationCache", "Call", "ForwardPass", "HookPoint", "LayerTop", "LogitLens",
    "MermaidDiagram", "PatchResult", "Summary", "TensorSpec", "Trace", "TraceSizeError", "ablate",
    "attention_rollout", "attention_shares", "head_entropy", "head_mean", "head_statistics", "hook_points",
    "layer_means", "logit_lens", "patch", "run_with_cache", "saliency", "special_token_masks", "to_graphviz",
    "to_mermaid", "trace",
]
