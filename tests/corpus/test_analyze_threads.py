"""analyze hooks the user's model for the length of its run: a forward of the same model on another thread (a
panel's, a warm-up's) in that time must run as if analyze were not there, and analyze's tables must not change."""

from __future__ import annotations

import threading

import pandas as pd
import torch

from bertviz_lab.corpus import analyze
from bertviz_lab.corpus.analyze import ShardWriter


def test_a_forward_on_another_thread_while_analyze_runs_is_left_alone(minilm, small_texts, tmp_path, monkeypatch):
    model, tokenizer = minilm
    inputs = tokenizer("The river ran past the old mill at dawn.", return_tensors="pt")
    with torch.inference_mode():
        expected = model(**inputs).last_hidden_state
    plain = analyze(model, tokenizer, small_texts, tmp_path / "plain", vectors=("hidden",), batch_size=8,
                    progress=False)

    elsewhere: list = []
    real_batch_inputs = ShardWriter.batch_inputs

    def with_a_forward_on_another_thread(self, *args):
        batch = real_batch_inputs(self, *args)  # the hooks and the statistics backend are in place by now

        def forward() -> None:
            try:
                with torch.inference_mode():
                    elsewhere.append(model(**inputs).last_hidden_state)
            except BaseException as error:  # noqa: BLE001 - the test reports what the other thread met
                elsewhere.append(error)

        thread = threading.Thread(target=forward)
        thread.start()
        thread.join()
        return batch

    monkeypatch.setattr(ShardWriter, "batch_inputs", with_a_forward_on_another_thread)
    shared = analyze(model, tokenizer, small_texts, tmp_path / "shared", vectors=("hidden",), batch_size=8,
                     progress=False)
    assert len(elsewhere) == 5  # one per batch of the 34 texts
    for got in elsewhere:
        assert isinstance(got, torch.Tensor), got
        assert torch.equal(got, expected)
    pd.testing.assert_frame_equal(shared.head_stats(), plain.head_stats())
    assert (shared.vectors(3) == plain.vectors(3)).all()


def train_steps(model: torch.nn.Module, steps: int, started: threading.Event | None = None,
                go_on: threading.Event | None = None) -> list[float]:
    """Plain masked-LM training steps on fixed batches (no dropout: nothing random); the losses."""
    generator = torch.Generator().manual_seed(3)
    batches = [torch.randint(1000, 2000, (4, 24), generator=generator) for _ in range(steps)]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    model.train()
    for step, ids in enumerate(batches):
        loss = model.get_loss(ids, ids)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step == 0 and started is not None:
            started.set()  # analyze may start now; the next steps run beside it
            go_on.wait(timeout=60)
    return losses


def test_analyze_beside_a_model_training_on_another_thread_gives_both_the_results_of_running_alone(
        minilm, small_texts, tmp_path):
    """analyze and a training loop of the same model class, each on its own model, at once: analyze changes
    nothing of the other model (its backends, its hooks, its numbers), and neither result moves a bit."""
    from tiny_models import tiny_config

    from bertviz_lab.model import BERTForMaskedLM

    _, tokenizer = minilm
    config = tiny_config(vocab_size=tokenizer.vocab_size, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                         max_position_embeddings=128)

    def fresh() -> BERTForMaskedLM:
        torch.manual_seed(0)
        return BERTForMaskedLM(config)

    alone_losses = train_steps(fresh(), 6)
    alone_corpus = analyze(fresh(), tokenizer, small_texts, tmp_path / "alone", vectors=("hidden",), batch_size=8,
                           progress=False)

    trained, analysed = fresh(), fresh()
    backends = [layer.attention.self.attention_backend for layer in trained.bert.encoder.layer]
    started, go_on, result = threading.Event(), threading.Event(), {}

    def training() -> None:
        try:
            result["losses"] = train_steps(trained, 6, started, go_on)
        except BaseException as error:  # noqa: BLE001 - the test reports what the training thread met
            result["error"] = error

    thread = threading.Thread(target=training)
    # the training thread goes on once analyze's first forward is under way: its steps run beside analyze's batches
    under_way = analysed.bert.encoder.layer[0].register_forward_pre_hook(lambda module, args: go_on.set())
    thread.start()
    try:
        assert started.wait(timeout=60)
        beside = analyze(analysed, tokenizer, small_texts, tmp_path / "beside", vectors=("hidden",), batch_size=8,
                         progress=False)
    finally:
        under_way.remove()
        go_on.set()
        thread.join(timeout=120)
    assert "error" not in result, result.get("error")
    assert result["losses"] == alone_losses  # float for float
    assert [layer.attention.self.attention_backend for layer in trained.bert.encoder.layer] == backends
    assert not any(point.is_watched for point in trained.hook_points().values())
    pd.testing.assert_frame_equal(beside.head_stats(), alone_corpus.head_stats())
    assert (beside.vectors(1) == alone_corpus.vectors(1)).all()
