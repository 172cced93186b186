"""Running a model for a panel: one lock per model, eval mode for the run, the previous mode after it."""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Iterator

_model_locks: "weakref.WeakKeyDictionary[Any, threading.RLock]" = weakref.WeakKeyDictionary()
_locks_lock = threading.Lock()


def model_lock(model: Any) -> threading.RLock:
    """One lock per model that every panel's run holds: a run on a worker thread (saliency) and the notebook's
    runs then never overlap, so no trace records another panel's forward and no run sees another's mode."""
    with _locks_lock:
        lock = _model_locks.get(model)
        if lock is None:
            lock = _model_locks[model] = threading.RLock()
        return lock


@contextlib.contextmanager
def evaluating(model: Any) -> Iterator[None]:
    """Eval mode (no dropout) for the block, then the model's previous mode again; the model's lock held."""
    with model_lock(model):
        was_training = model.training
        model.eval()
        try:
            yield
        finally:
            model.train(was_training)
