"""The panels' front ends: one module per view in static/, each with the helpers all views share (shared.js) put
in front, since anywidget loads a view's code as one module that cannot import its neighbours."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).with_name("static")


def esm(name: str) -> str:
    """The ES module of the view in static/`name`, shared helpers included."""
    return (STATIC / "shared.js").read_text(encoding="utf-8") + "\n" + (STATIC / name).read_text(encoding="utf-8")

