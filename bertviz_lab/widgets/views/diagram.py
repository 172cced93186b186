"""The architecture diagram's browser view: the panel's figure fit to the panel's width (or whole), with zoom and pan,
for Graphviz's drawing and for mermaid's alike."""

from __future__ import annotations

import anywidget
import traitlets

from bertviz_lab.widgets.views.front_end import css, esm

GRAPHVIZ_FONT = 14  # points in Graphviz's SVG units; the view scales them to 12–16 px on screen


class DiagramView(anywidget.AnyWidget):
    """Shows `svg` (the panel's to_svg(): the figure the static copy and exports hold) fit to the width, text kept
    between min and max px, or the whole diagram fit in both directions, with zoom buttons, ctrl+wheel zoom and
    drag-to-pan. With renderer "mermaid" it shows, in the same way, the drawing the front end made of the panel's
    mermaid output (which it then hides)."""

    _esm = esm("architecture.js")
    _css = css("architecture")
    svg = traitlets.Unicode("").tag(sync=True)
    renderer = traitlets.Unicode("graphviz").tag(sync=True)  # graphviz: `svg`; mermaid: the front end's drawing
    fit = traitlets.Unicode("width").tag(sync=True)  # width: readable text across the width; whole: all of it
    zoom = traitlets.Float(1.0).tag(sync=True)  # times the fitted size
    font_size = traitlets.Float(GRAPHVIZ_FONT).tag(sync=True)  # the diagram's text size in SVG units
    min_font_px = traitlets.Float(12.0).tag(sync=True)
    max_font_px = traitlets.Float(16.0).tag(sync=True)
