"""What the corpus views share: a drawing the kernel made, and a click (or Enter) in the browser that asks the kernel
to open one corpus text in the attention panel."""

from __future__ import annotations

from typing import Any, Callable

import anywidget
import traitlets


class OpensText(anywidget.AnyWidget):
    """A corpus view: its figure (`svg`, the document the static copy and exports hold) and the texts it opens.

    The front end sends {"type": "open", "index": i} for the i-th thing it lists (a top text, a match, a point);
    `opened(i)` says what that is, and every callback given to on_open() gets it.
    """

    svg = traitlets.Unicode("").tag(sync=True)  # the figure: exactly what to_svg() returns

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._open_listeners: list[Callable[..., None]] = []
        self.on_msg(self._front_end_message)

    def on_open(self, callback: Callable[..., None]) -> None:
        """Call `callback(**what)` when the front end opens an item; `what` comes from opened(index)."""
        self._open_listeners.append(callback)

    def opened(self, index: int) -> dict[str, Any] | None:
        """What opening the index-th item means (text_id and where), or None for an index the view does not hold."""
        raise NotImplementedError

    def open_item(self, index: int) -> bool:
        """Open the index-th item as a click would; False when there is no such item."""
        what = self.opened(index)
        if what is None:
            return False
        for callback in list(self._open_listeners):
            callback(**what)
        return True

    def _front_end_message(self, _: Any, content: Any, buffers: list) -> None:
        if isinstance(content, dict) and content.get("type") == "open" and isinstance(content.get("index"), int):
            self.open_item(content["index"])

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document: the same drawing the browser shows."""
        return self.svg
