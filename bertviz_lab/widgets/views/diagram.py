"""The Graphviz diagram's browser view: the SVG fit to the panel's width, with zoom and pan."""

from __future__ import annotations

import anywidget
import traitlets

from bertviz_lab.widgets.views.front_end import css, esm

GRAPHVIZ_FONT = 14  # points in Graphviz's SVG units; the view scales them to 12–16 px on screen


class DiagramView(anywidget.AnyWidget):
    """A Graphviz SVG in the browser: fit to the width (text kept between min and max px), zoom and pan."""

    _esm = esm("architecture.js")
    _css = css("architecture")
    svg = traitlets.Unicode("").tag(sync=True)
    zoom = traitlets.Float(1.0).tag(sync=True)  # times the fitted size
    font_size = traitlets.Float(GRAPHVIZ_FONT).tag(sync=True)  # the diagram's text size in SVG units
    min_font_px = traitlets.Float(12.0).tag(sync=True)
    max_font_px = traitlets.Float(16.0).tag(sync=True)
