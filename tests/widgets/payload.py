"""What a widget sends to the browser, in bytes: its synced state, and the messages of one update."""

from __future__ import annotations

import contextlib
import json
from typing import Iterator

import ipywidgets as widgets
from ipywidgets.widgets.widget import _remove_buffers

CODE_TRAITS = ("_esm", "_css")  # anywidget's front-end code: sent once per class, not per view


def state_bytes(widget: widgets.Widget) -> int:
    """Bytes of a widget's synced state as the front end receives it: JSON plus binary buffers, code left out."""
    state = {k: v for k, v in widget.get_state().items() if k not in CODE_TRAITS}
    state, _, buffers = _remove_buffers(state)
    return len(json.dumps(state, default=str).encode()) + sum(memoryview(b).nbytes for b in buffers)


@contextlib.contextmanager
def sent_messages(widget: widgets.Widget) -> Iterator[list[int]]:
    """Sizes (JSON + buffers) of the comm messages the widget sends inside the block."""
    sizes: list[int] = []
    comm = widget.comm
    original = comm.send

    def send(data=None, metadata=None, buffers=None, **kwargs):
        sizes.append(len(json.dumps(data, default=str).encode()) + sum(memoryview(b).nbytes for b in buffers or ()))
        return original(data=data, metadata=metadata, buffers=buffers, **kwargs)

    comm.send = send
    try:
        yield sizes
    finally:
        del comm.send
