"""Jupyter panels fed by a Trace or a metric stream (needs the `lab` extra)."""

from bertviz_lab.widgets.panels.architecture import ArchitecturePanel
from bertviz_lab.widgets.panels.attention import AttentionPanel
from bertviz_lab.widgets.panels.corpus import CorpusPanel
from bertviz_lab.widgets.panels.device_picker import DevicePicker
from bertviz_lab.widgets.panels.loss_curves import LossCurves
from bertviz_lab.widgets.panels.masking import MaskingPreview
from bertviz_lab.widgets.panels.saliency import SaliencyPanel
from bertviz_lab.widgets.panels.training import TrainingPanel
from bertviz_lab.widgets.panels.workbench import Workbench, open_view

__all__ = ["ArchitecturePanel", "AttentionPanel", "CorpusPanel", "DevicePicker", "LossCurves", "MaskingPreview",
           "SaliencyPanel", "TrainingPanel", "Workbench", "open_view"]
