"""Jupyter panels fed by a Trace or a metric stream (needs the `lab` extra)."""

from bertviz_lab.widgets.architecture_panel import ArchitecturePanel
from bertviz_lab.widgets.attention_panel import AttentionPanel
from bertviz_lab.widgets.device_picker import DevicePicker
from bertviz_lab.widgets.loss_curves import LossCurves
from bertviz_lab.widgets.masking_preview import MaskingPreview
from bertviz_lab.widgets.saliency_view import SaliencyPanel
from bertviz_lab.widgets.training_panel import TrainingPanel
from bertviz_lab.widgets.workbench import Workbench, open_view

__all__ = ["ArchitecturePanel", "AttentionPanel", "DevicePicker", "LossCurves", "MaskingPreview", "SaliencyPanel",
           "TrainingPanel", "Workbench", "open_view"]
