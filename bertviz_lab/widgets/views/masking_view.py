"""The masking preview in the browser: the drawing of figures.masking, and the tokens a click masks."""

from __future__ import annotations

import anywidget
import traitlets

from bertviz_lab.widgets.views.front_end import css, esm


class MaskingView(anywidget.AnyWidget):
    """One SVG document (the same as the static copy and the export) whose toggleable token chips are buttons.

    A chip clicked (or Space/Enter on it) in any front end, a reloaded page or a second tab included, writes the
    toggled position list to `chosen`; the panel observes it, masks those tokens and draws again.
    """

    _esm = esm("masking_view.js")
    _css = css("masking_view")
    svg = traitlets.Unicode("").tag(sync=True)  # the figure: exactly what the panel's to_svg() returns
    chosen = traitlets.List(traitlets.Int()).tag(sync=True)  # the positions the user masked, ascending

    def to_svg(self) -> str:
        """The drawing on screen."""
        return self.svg
