"""A panel's short forward (little work: a short text on a small model) runs on one CPU thread and gives the thread
count back, also when it fails; a long text or a large model keeps the pool, and a forward on another thread keeps
its own."""

from __future__ import annotations

import threading

import pytest
import torch

from bertviz_lab.widgets.panels import running
from bertviz_lab.widgets.panels.running import forward_work, threads_for
from bertviz_lab.widgets.panels.text_run import run_text

SHORT = "The cat sat on the mat because it was warm."


@pytest.fixture
def two_threads():
    """A pool of two threads (the suite runs on one), given back after the test."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def threads_seen_by_forward(model, tokenizer, text: str) -> list[int]:
    """The thread count torch reports inside each layer's forward while run_text runs the model on `text`."""
    seen: list[int] = []
    handle = model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    try:
        run_text(model, tokenizer, text, shapes=False)
    finally:
        handle.remove()
    return seen


def test_a_short_text_runs_on_one_thread_and_the_pool_comes_back(pretraining_model, minilm_tokenizer, two_threads):
    assert threads_seen_by_forward(pretraining_model, minilm_tokenizer, SHORT) == [1]
    assert torch.get_num_threads() == 2


def test_a_long_forward_keeps_every_thread(pretraining_model, minilm_tokenizer, two_threads, monkeypatch):
    tokens = len(minilm_tokenizer.encode(SHORT))
    work = forward_work(pretraining_model, tokens)
    monkeypatch.setattr(running, "ONE_THREAD_WORK", work - 1)  # SHORT is now a little too much work
    assert threads_seen_by_forward(pretraining_model, minilm_tokenizer, SHORT) == [2]
    monkeypatch.setattr(running, "ONE_THREAD_WORK", work)
    assert threads_seen_by_forward(pretraining_model, minilm_tokenizer, SHORT) == [1]
    assert torch.get_num_threads() == 2


def test_the_work_counts_the_weights_outside_the_embeddings():
    from bertviz_lab.model import BERT, BERTConfig

    def encoder(layers: int, width: int) -> torch.nn.Module:
        return BERT(BERTConfig(vocab_size=30522, hidden_size=width, num_hidden_layers=layers,
                               num_attention_heads=width // 64, intermediate_size=4 * width), add_pooling_layer=False)

    minilm_sized, base_sized = encoder(6, 384), encoder(12, 768)
    assert 1.3e9 < forward_work(minilm_sized, 128) < running.ONE_THREAD_WORK  # MiniLM on 128 tokens: one thread
    assert forward_work(base_sized, 17) < running.ONE_THREAD_WORK < forward_work(base_sized, 18)
    assert forward_work(base_sized, 512) == 512 * forward_work(base_sized, 1)


def test_a_failing_block_gives_the_threads_back(two_threads):
    with pytest.raises(RuntimeError, match="boom"):
        with threads_for(torch.nn.Linear(4, 4), 10):
            assert torch.get_num_threads() == 1
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 2


def test_only_cpu_forwards_are_narrowed(two_threads):
    with threads_for(torch.nn.Linear(4, 4), 10, torch.device("meta")):
        assert torch.get_num_threads() == 2


def test_a_forward_on_another_thread_keeps_its_own_threads(two_threads):
    ready, inside, leave = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def other() -> None:
        seen.append(torch.get_num_threads())  # this thread's count, taken before the main thread narrows its own
        ready.set()
        inside.wait(10)
        seen.append(torch.get_num_threads())  # while the main thread's block runs on one thread
        leave.set()

    worker = threading.Thread(target=other)
    worker.start()
    assert ready.wait(10)
    with threads_for(torch.nn.Linear(4, 4), 10):
        inside.set()
        assert leave.wait(10)
        assert torch.get_num_threads() == 1
    worker.join(10)
    assert seen == [2, 2] and torch.get_num_threads() == 2
