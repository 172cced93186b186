"""Jupyter panels fed by a Trace or a metric stream (needs the `lab` extra)."""

from bertviz_lab.widgets.device_picker import DevicePicker
from bertviz_lab.widgets.loss_curves import LossCurves
from bertviz_lab.widgets.masking_preview import MaskingPreview

__all__ = ["DevicePicker", "LossCurves", "MaskingPreview"]
