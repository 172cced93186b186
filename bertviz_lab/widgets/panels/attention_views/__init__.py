"""The attention views' glue, one module per view of the attention panel's switcher: how each view's widget is
made, drawn from an `AttentionSource` and named for export (base.AttentionView).

A view's module has the registry entry's `attribute` as its name (`head view` -> `head_view.py`) and a `VIEW`; the
AttentionPanel and the AttentionMapsPanel of `bertviz_lab.views` look views up here by their registry name, so
adding a view is a figure, a widget, a module here and a line in `registry.REGISTRY`.
"""

from __future__ import annotations

import importlib

from bertviz_lab.widgets import registry
from bertviz_lab.widgets.panels.attention_views.base import AttentionSource, AttentionView, Axes

__all__ = ["AttentionSource", "AttentionView", "Axes", "glue"]

_LOADED: dict[str, AttentionView] = {}


def glue(name: str) -> AttentionView:
    """The glue of the attention view called `name` (a registry name; an unknown one is the registry's error)."""
    found = _LOADED.get(name)
    if found is None:
        entry = registry.view(name, registry.ATTENTION)
        found = importlib.import_module(f"{__name__}.{entry.attribute}").VIEW
        if found.name != name:
            raise ValueError(f"{__name__}.{entry.attribute} holds the glue of {found.name!r}, not of {name!r}.")
        _LOADED[name] = found
    return found
