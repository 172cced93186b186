"""The architecture diagram's browser view: the panel's figure fit to the panel's width, with zoom and pan."""

from __future__ import annotations

import anywidget
import traitlets

from bertviz_lab.widgets.views.front_end import css, esm

GRAPHVIZ_FONT = 14  # points in Graphviz's SVG units; the view scales them to 12–16 px on screen


class DiagramView(anywidget.AnyWidget):
    """Shows `svg` (the panel's to_svg(): the figure the static copy and exports hold) fit to the width, text kept
    between min and max px, with zoom buttons, ctrl+wheel zoom and drag-to-pan."""

    _esm = esm("architecture.js")
    _css = css("architecture")
    svg = traitlets.Unicode("").tag(sync=True)
    zoom = traitlets.Float(1.0).tag(sync=True)  # times the fitted size
    font_size = traitlets.Float(GRAPHVIZ_FONT).tag(sync=True)  # the diagram's text size in SVG units
    min_font_px = traitlets.Float(12.0).tag(sync=True)
    max_font_px = traitlets.Float(16.0).tag(sync=True)
