"""Running a model for a panel: one lock per model, eval mode for the run, the previous mode after it, and one CPU
thread for a short input."""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Iterator

import torch

_model_locks: "weakref.WeakKeyDictionary[Any, threading.RLock]" = weakref.WeakKeyDictionary()
_locks_lock = threading.Lock()

# Up to this many multiply-adds (tokens x weights outside the embeddings: about 1.4e9 for MiniLM on 128 tokens, and
# for bert-base on 17) a panel's forward runs on one CPU thread. Each of its ~40 parallel regions (a GEMM, the
# attention, the GELU) is then well under a millisecond of work, and a second thread adds the wait for a core that the
# browser (drawing the cell that runs), the Jupyter server or another process holds: on the 2-core development
# machine, with other work running, MiniLM on 14 tokens took 116 ms (median) on 2 threads and 25 ms on one, on 120
# tokens 328 and 140 ms; a warm `%bert_inspect` in one page 0.36 and 0.29 s. With a core free it costs: the kernel
# alone showed the panel 15 ms later (benchmarks/README.md, `%bert_inspect`). Larger forwards keep every thread.
ONE_THREAD_WORK = 1.5e9


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


def forward_work(model: torch.nn.Module, tokens: int) -> float:
    """About the multiply-adds of a forward on `tokens` tokens: tokens x the weights outside the embedding tables."""
    embeddings = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding))
    return tokens * max(sum(p.numel() for p in model.parameters()) - embeddings, 0)


@contextlib.contextmanager
def threads_for(model: torch.nn.Module, tokens: int, device: Any = "cpu") -> Iterator[None]:
    """One CPU thread for the block where `model`'s forward on `tokens` tokens on the CPU is short (ONE_THREAD_WORK),
    the thread count before it afterwards. PyTorch keeps that count per OS thread (OpenMP), so only the thread that
    runs the block is narrowed; a forward on another thread (training, saliency) keeps its own."""
    threads = torch.get_num_threads()
    if torch.device(device).type != "cpu" or threads == 1 or forward_work(model, tokens) > ONE_THREAD_WORK:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
