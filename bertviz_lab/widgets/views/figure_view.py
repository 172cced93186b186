"""A figure the kernel drew, shown as it is: the view of figures whose only interaction is the tooltips they hold."""

from __future__ import annotations

import anywidget
import traitlets

from bertviz_lab.widgets.views.front_end import css, esm


class FigureView(anywidget.AnyWidget):
    """One SVG document (a figures/ drawing) on screen; the same document is the static copy and the export."""

    _esm = esm("figure_view.js")
    _css = css("figure_view")
    svg = traitlets.Unicode("").tag(sync=True)  # the figure: exactly what to_svg() returns

    def to_svg(self) -> str:
        """The drawing on screen."""
        return self.svg
