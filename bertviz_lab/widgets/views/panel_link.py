"""The invisible part of every live panel that ties it to its static copy in the notebook."""

from __future__ import annotations

import anywidget
import traitlets

from bertviz_lab.widgets.views.front_end import css, esm


class StaticCopyHider(anywidget.AnyWidget):
    """An invisible part of a live panel: while it is on screen, the static copy with its id is hidden."""

    _esm = esm("static_copy.js")
    _css = css("static_copy")
    static_id = traitlets.Unicode("").tag(sync=True)
