"""Panels: what users compose from views and controls (AttentionPanel, MaskingPreview, Workbench, ...), each reading
a Trace, a corpus or a metric stream."""
