"""analyze hooks the user's model for the length of its run: a forward of the same model on another thread (a
panel's, a warm-up's) in that time must run as if analyze were not there, and analyze's tables must not change."""

from __future__ import annotations

import threading

import pandas as pd
import pytest
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


@pytest.mark.usefixtures("avx2_forced")  # statistics from the kernel's attention pass
def test_backends_chosen_again_mid_run_stop_analyze_with_a_line_saying_so(minilm, small_texts, tmp_path,
                                                                          monkeypatch):
    from bertviz_lab import kernels
    from bertviz_lab.corpus.folder import SHARDS

    model, tokenizer = minilm
    real_batch_inputs = ShardWriter.batch_inputs

    def choose_again(self, *args):
        batch = real_batch_inputs(self, *args)
        kernels.choose(model)  # what a model.to() or kernels.choose on another thread does to the layers
        return batch

    monkeypatch.setattr(ShardWriter, "batch_inputs", choose_again)
    with pytest.raises(RuntimeError, match=r"layers \[0, 1, 2, 3, 4\] gave no statistics: their attention backend "
                                           r"was replaced while analyze ran .* run analyze again, it resumes"):
        analyze(model, tokenizer, small_texts, tmp_path / "c", batch_size=8, progress=False)
    assert not list((tmp_path / "c" / SHARDS).glob("0*"))  # nothing half-written is published
    monkeypatch.undo()
    resumed = analyze(model, tokenizer, small_texts, tmp_path / "c", batch_size=8, progress=False)
    assert resumed.num_texts == len(small_texts)


@pytest.mark.usefixtures("avx2_forced")  # statistics from the kernel's attention pass
def test_a_backend_given_mid_run_is_kept_when_analyze_stops(minilm, small_texts, tmp_path, monkeypatch):
    from bertviz_lab import kernels
    from bertviz_lab.kernels.attention import BACKENDS

    model, tokenizer = minilm
    layers = [model.get_submodule(f"encoder.layer.{i}.attention.self") for i in range(model.config.num_hidden_layers)]
    real_batch_inputs = ShardWriter.batch_inputs

    def give_sdpa(self, *args):
        for layer in layers:  # what kernels.override(attention="sdpa") does to the layers
            layer.attention_backend = BACKENDS["sdpa"]
        return real_batch_inputs(self, *args)

    monkeypatch.setattr(ShardWriter, "batch_inputs", give_sdpa)
    try:
        with pytest.raises(RuntimeError, match="gave no statistics"):
            analyze(model, tokenizer, small_texts, tmp_path / "c", batch_size=8, progress=False)
        assert all(layer.attention_backend is BACKENDS["sdpa"] for layer in layers)  # not put back to AVX2
    finally:
        kernels.choose(model)
