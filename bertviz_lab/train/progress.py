"""Log lines and the tqdm progress bar on one terminal: while a bar is shown, console log lines go above it.

A plain StreamHandler writes its line right after the bar's text (the bar has no newline), so `step 50: ...` would
share a line with `pretraining: 17%|...`. `log_above(bar, logger)` hands the console handlers of the logger and of
the ancestors it propagates to to tqdm's own `logging_redirect_tqdm` (clear the bar, write the line, redraw the bar),
and puts them back afterwards, also on error. Formatters, filters and levels stay the caller's.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any, Iterator

from tqdm.contrib.logging import logging_redirect_tqdm


def _is_console(handler: logging.Handler) -> bool:
    """A handler that writes to the terminal: what logging_redirect_tqdm replaces."""
    return isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.stderr)


def console_loggers(logger: logging.Logger) -> list[logging.Logger]:
    """The loggers a record of `logger` reaches (itself, then its ancestors while they propagate) that hold a console
    handler: redirecting any other would add a console handler it did not have."""
    found: list[logging.Logger] = []
    current: logging.Logger | None = logger
    while current is not None:
        if any(_is_console(handler) for handler in current.handlers):
            found.append(current)
        current = current.parent if current.propagate else None
    return found


@contextlib.contextmanager
def log_above(bar: Any, logger: logging.Logger) -> Iterator[None]:
    """While `bar` (a tqdm bar) is shown, `logger`'s console lines are written above it instead of onto its line."""
    if getattr(bar, "disable", True):
        yield
        return
    loggers = console_loggers(logger)
    levels = [next(h for h in lg.handlers if _is_console(h)).level for lg in loggers]
    with logging_redirect_tqdm(loggers, tqdm_class=type(bar)):
        for redirected, level in zip(loggers, levels):
            redirected.handlers[-1].setLevel(level)  # tqdm's handler (added last) keeps the console handler's level
        yield
