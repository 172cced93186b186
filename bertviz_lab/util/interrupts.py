"""Ctrl-C and SIGTERM for a long run (training, a corpus analysis): handlers installed for a block and put back
after it, on the main thread only."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator

INTERRUPT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM") if hasattr(signal, name))


@contextlib.contextmanager
def interrupt_handlers(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """`handler` for SIGINT and SIGTERM during the block, the previous handlers put back after it. Elsewhere than on
    the main thread nothing is installed: Python runs signal handlers on the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, handler) for number in INTERRUPT_SIGNALS}
    try:
        yield
    finally:
        for number, earlier in previous.items():
            signal.signal(number, signal.SIG_DFL if earlier is None else earlier)  # None: one installed outside Python
