"""Log lines and the tqdm progress bar on one terminal: while a bar is shown, console log handlers write above it.

A plain StreamHandler writes its line right after the bar's text (the bar has no newline), so `step 50: ...` would
share a line with `pretraining: 17%|...`. `log_above(bar)` points each console handler of a logger and its ancestors
at a stream that writes with `tqdm.write` (clear the bar, write the line, redraw the bar) and puts the handlers'
streams back afterwards, also on error. Handlers, formatters and levels stay the caller's.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any, Iterator


class _AboveBar:
    """A write-only stream that hands each write to tqdm.write, so it lands above the bars on the same console."""

    def __init__(self, bar_class: type, stream: Any) -> None:
        self._bar_class, self._stream = bar_class, stream

    def write(self, text: str) -> int:
        self._bar_class.write(text, file=self._stream, end="")
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def _is_console(handler: logging.Handler) -> bool:
    """A handler that writes to the terminal (stdout or stderr), not to a file."""
    return (isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
            and handler.stream in (sys.stdout, sys.stderr))


def console_handlers(logger: logging.Logger) -> list[logging.StreamHandler]:
    """The console handlers a record of `logger` reaches: its own and its ancestors' while they propagate."""
    found: list[logging.StreamHandler] = []
    current: logging.Logger | None = logger
    while current is not None:
        found += [handler for handler in current.handlers if _is_console(handler)]
        current = current.parent if current.propagate else None
    return found


@contextlib.contextmanager
def log_above(bar: Any, logger: logging.Logger) -> Iterator[None]:
    """While `bar` (a tqdm bar) is shown, `logger`'s console lines are written above it instead of onto its line."""
    if getattr(bar, "disable", True):
        yield
        return
    swapped = [(handler, handler.setStream(_AboveBar(type(bar), handler.stream)))
               for handler in console_handlers(logger)]
    try:
        yield
    finally:
        for handler, stream in reversed(swapped):
            handler.setStream(stream)
