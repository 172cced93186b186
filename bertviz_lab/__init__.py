"""bertviz_lab: see inside BERT. A fast PyTorch BERT, forward-hook traces and Jupyter widget panels."""

__version__ = "0.1.0"
