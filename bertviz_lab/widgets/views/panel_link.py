"""The invisible part of every live panel that ties it to its static copy in the notebook and to its kernel."""

from __future__ import annotations

from typing import Any

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

    def __init__(self, html: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._html = html
        self.on_msg(self._answer)

    @property
    def html(self) -> str:
        """The static copy's text/html as StaticCopy.bundle() holds it: sent to the front ends in a message, not
        kept in the synced state, so a notebook that stores widget state does not hold every figure twice."""
        return self._html

    @html.setter
    def html(self, value: str) -> None:
        if value != self._html:
            self._html = value
            self.send({"type": "html", "html": value})

    def _answer(self, _: Any, content: Any, buffers: list) -> None:
        """A front end that attaches (a reload, a second tab) asks for the copy it should keep."""
        if isinstance(content, dict) and content.get("type") == "html?":
            self.send({"type": "html", "html": self._html})
