"""The invisible part of every live panel that ties it to its static copy in the notebook and to its kernel."""

from __future__ import annotations

import anywidget
import traitlets

from bertviz_lab.widgets.views.front_end import all_css, esm


class PanelLink(anywidget.AnyWidget):
    """An invisible child of a live panel that keeps the notebook's static copy of it current in every front end.

    While its view is on screen it hides the static copy with its id; it writes `html` (the copy's current HTML)
    into the notebook model of each front end attached, so a save there stores the figure on screen even after a
    reload or from a second tab; and it greys the panel's controls out with a one-line notice while no kernel runs.
    Controls that work without a kernel carry `data-bvl-local` and stay enabled.
    """

    _esm = esm("panel_link.js")
    _css = all_css()  # every view's stylesheet, so the panels' own HTML (chips, tables, tabs) is styled in the page too
    static_id = traitlets.Unicode("").tag(sync=True)
    html = traitlets.Unicode("").tag(sync=True)  # the static copy's text/html, as StaticCopy.bundle() holds it
