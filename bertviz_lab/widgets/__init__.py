"""Jupyter panels fed by a Trace or a metric stream (needs the `lab` extra).

The panels are imported on first use (`from bertviz_lab.widgets import Workbench`), so that the light modules of
this package (`registry`, which `%load_ext bertviz_lab` reads) do not pull in ipywidgets, anywidget and every panel.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for type checkers and the API reference
    from bertviz_lab.widgets.panels.architecture import ArchitecturePanel
    from bertviz_lab.widgets.panels.attention import AttentionPanel
    from bertviz_lab.widgets.panels.causal import CausalPanel
    from bertviz_lab.widgets.panels.corpus import CorpusPanel
    from bertviz_lab.widgets.panels.device_picker import DevicePicker
    from bertviz_lab.widgets.panels.ffn_neurons import FFNNeuronsPanel
    from bertviz_lab.widgets.panels.logit_lens import LogitLensPanel
    from bertviz_lab.widgets.panels.loss_curves import LossCurves
    from bertviz_lab.widgets.panels.masking import MaskingPreview
    from bertviz_lab.widgets.panels.patching import PatchingPanel
    from bertviz_lab.widgets.panels.saliency import SaliencyPanel
    from bertviz_lab.widgets.panels.training import TrainingPanel
    from bertviz_lab.widgets.panels.workbench import Workbench, open_view

_PANELS = {
    "ArchitecturePanel": "architecture",
    "AttentionPanel": "attention",
    "CausalPanel": "causal",
    "CorpusPanel": "corpus",
    "DevicePicker": "device_picker",
    "FFNNeuronsPanel": "ffn_neurons",
    "LogitLensPanel": "logit_lens",
    "LossCurves": "loss_curves",
    "MaskingPreview": "masking",
    "PatchingPanel": "patching",
    "SaliencyPanel": "saliency",
    "TrainingPanel": "training",
    "Workbench": "workbench",
    "open_view": "workbench",
}

__all__ = ["ArchitecturePanel", "AttentionPanel", "CausalPanel", "CorpusPanel", "DevicePicker", "FFNNeuronsPanel",
           "LogitLensPanel", "LossCurves", "MaskingPreview", "PatchingPanel", "SaliencyPanel", "TrainingPanel",
           "Workbench", "open_view"]  # = _PANELS's names


def __getattr__(name: str) -> Any:
    if name not in _PANELS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"bertviz_lab.widgets.panels.{_PANELS[name]}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PANELS})
