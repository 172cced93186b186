"""bertviz_lab: see inside BERT. A fast PyTorch BERT, forward-hook traces and Jupyter widget panels."""

from __future__ import annotations

from bertviz_lab.device import available_devices, describe_devices, select_device
from bertviz_lab.model import *  # noqa: F403 (the model family is the package's core API)
from bertviz_lab.model import __all__ as _model_names
from bertviz_lab.model.auto import load, load_default

__version__ = "0.1.0"
__all__ = [*_model_names, "available_devices", "describe_devices", "select_device", "load", "load_default"]


def load_ipython_extension(ipython):  # noqa: ANN001 (an IPython shell)
    """`%load_ext bertviz_lab` registers %bert_inspect (IPython is imported only here, not by `import bertviz_lab`)."""
    from bertviz_lab.magics import load_ipython_extension as load

    load(ipython)


def __getattr__(name: str):  # noqa: ANN202 (a module attribute)
    """`bertviz_lab.views` (bertviz-style views of any model's attention) is imported on first use: the widget
    libraries it needs are not loaded by `import bertviz_lab`."""
    if name == "views":
        import importlib

        return importlib.import_module("bertviz_lab.views")
    raise AttributeError(f"module 'bertviz_lab' has no attribute {name!r}")
