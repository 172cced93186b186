"""Saliency says how far a run is: saliency(progress=) reports the steps done after each batch of points, and the
panel sends "Integrated gradients: done/total steps" to the browser while the run goes (from the notebook's thread
and from its worker thread alike), over the previous figure dimmed, until the new figure arrives."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from bertviz_lab.trace import saliency
from bertviz_lab.widgets import SaliencyPanel
from bertviz_lab.widgets.panels import saliency as SV

PLAIN = "the cat sat on the mat ."
PAIR = ["the cat sat on the mat .", "a dog ran home ."]


def test_progress_reports_the_steps_every_row_has_finished(backbone, minilm_tokenizer):
    inputs = minilm_tokenizer(PAIR, return_tensors="pt", padding=True)
    calls: list[tuple[int, int]] = []
    scores = saliency(backbone, inputs, lambda out: out.last_hidden_state[:, 0, 0], steps=8, tokenizer=minilm_tokenizer,
                      internal_batch_size=5, progress=lambda done, total: calls.append((done, total)))
    # 8 steps x 2 rows = 16 points, 5 a batch, step-major: batches end after points 5, 10, 15 and 16
    assert calls == [(5 // 2, 8), (10 // 2, 8), (15 // 2, 8), (8, 8)]
    plain = saliency(backbone, inputs, lambda out: out.last_hidden_state[:, 0, 0], steps=8, tokenizer=minilm_tokenizer,
                     internal_batch_size=5)
    np.testing.assert_array_equal(scores.numpy(), plain.numpy())  # reporting changes nothing
    calls.clear()
    saliency(backbone, inputs, lambda out: out.last_hidden_state[:, 0, 0], method="gradient_x_input",
             tokenizer=minilm_tokenizer, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 1)]


class SentMessages:
    """Records the state updates a view's comm sends (what reaches the browser)."""

    def __init__(self, view) -> None:
        self.states: list[dict] = []
        self.threads: set[str] = set()  # the threads that sent a step done
        send = view.comm.send

        def recorded(data=None, metadata=None, buffers=None):
            if isinstance(data, dict) and data.get("method") == "update":
                self.states.append(dict(data["state"]))
                if data["state"].get("progress_done"):
                    self.threads.add(threading.current_thread().name)
            return send(data=data, metadata=metadata, buffers=buffers)

        view.comm.send = recorded

    def progress(self) -> list[tuple[int, int]]:
        """(done, total) of every message that moved the progress line, in order."""
        shown, current = [], (0, 0)
        for state in self.states:
            moved = (state.get("progress_done", current[0]), state.get("progress_total", current[1]))
            if moved != current and ("progress_done" in state or "progress_total" in state):
                shown.append(moved)
            current = moved
        return shown


@pytest.mark.parametrize("background", [False, True])
def test_the_panel_sends_progress_while_integrated_gradients_runs(backbone, minilm_tokenizer, monkeypatch, background):
    monkeypatch.setattr(SV, "PROGRESS_INTERVAL_S", 0)  # every update sent, however fast the tiny model is
    monkeypatch.setattr(SV, "MIN_BATCH_TOKENS", 0)  # batches as small as the updates ask, however short the text
    panel = SaliencyPanel(backbone, minilm_tokenizer, PLAIN, method="gradient_x_input", steps=16)
    panel.background = background
    sent = SentMessages(panel.view)
    texts: list[str] = []
    panel.view.observe(lambda _: texts.append(panel.view.progress_text), names="progress_done")
    panel.method.value = "integrated_gradients"
    assert panel.wait(60)
    # 16 points in batches of 16 / PROGRESS_UPDATES = 2: the line goes 0, 2, 4, ... 16 of 16
    assert sent.progress() == [(0, 16), *((done, 16) for done in range(2, 17, 2)), (0, 0)]
    assert texts[:8] == [f"Integrated gradients: {done}/16 steps" for done in range(2, 17, 2)]
    assert panel.view.status == "ready" and panel.view.progress_text == ""
    assert sent.threads == {"bertviz-saliency" if background else threading.current_thread().name}
    # the computing figure (the previous tokens dimmed) went before the first step, the new one after the last
    first = next(i for i, s in enumerate(sent.states) if s.get("progress_total") == 16)
    assert 'data-status="computing"' in sent.states[first]["svg"] and "bvl-stale" in sent.states[first]["svg"]
    last = next(i for i, s in enumerate(sent.states) if s.get("progress_total") == 0)
    assert 'data-status="ready"' in sent.states[last]["svg"] and "bvl-stale" not in sent.states[last]["svg"]


def test_a_short_text_is_not_split_into_small_batches(backbone, minilm_tokenizer, monkeypatch):
    monkeypatch.setattr(SV, "PROGRESS_INTERVAL_S", 0)
    panel = SaliencyPanel(backbone, minilm_tokenizer, PLAIN, method="gradient_x_input", steps=16)
    panel.background = False
    done: list[int] = []
    panel.view.observe(lambda change: done.append(change["new"]), names="progress_done")
    length = panel.encoded.encoding["input_ids"].shape[1]
    assert 16 * length < SV.MIN_BATCH_TOKENS  # the whole run fits one efficient batch
    panel.method.value = "integrated_gradients"
    assert done == [16, 0]  # one forward: the line goes from 0 to 16 of 16 at once


def test_progress_of_a_run_no_longer_wanted_is_not_shown(backbone, minilm_tokenizer, monkeypatch):
    monkeypatch.setattr(SV, "PROGRESS_INTERVAL_S", 0)
    panel = SaliencyPanel(backbone, minilm_tokenizer, PLAIN, method="gradient_x_input", steps=16)
    job = panel._job()
    panel.method.value = "integrated_gradients"
    assert panel.wait(60)
    stale = panel._progress_of(job)  # the gradient × input job, no longer what the toolbar asks for
    panel.view.computing("something else", "Integrated gradients", 16)
    stale(8, 16)
    assert panel.view.progress_done == 0


def test_progress_messages_are_throttled_but_the_last_is_sent(backbone, minilm_tokenizer, monkeypatch):
    monkeypatch.setattr(SV, "PROGRESS_INTERVAL_S", 3600)
    monkeypatch.setattr(SV, "MIN_BATCH_TOKENS", 0)
    panel = SaliencyPanel(backbone, minilm_tokenizer, PLAIN, method="gradient_x_input", steps=16)
    panel.background = False
    done: list[int] = []
    panel.view.observe(lambda change: done.append(change["new"]), names="progress_done")
    panel.method.value = "integrated_gradients"
    assert done == [2, 16, 0]  # the first update, then only the last (and the reset once the figure is drawn)
