"""Encode once, trace once: a Workbench runs the model once per text (and per device move) and every panel reads
that run, showing what the panels show when each runs the model itself."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch
from widgets_testlib import tiny_config

from bertviz_lab.model import BERTForSequenceClassification, BERTForTokenClassification
from bertviz_lab.model.encoding import encode_text
from bertviz_lab.model.encoding import encode_text as model_encode_text
from bertviz_lab.widgets import ArchitecturePanel, AttentionPanel, MaskingPreview, Workbench
from bertviz_lab.widgets.panels.attention import trace_text
from bertviz_lab.widgets.panels.predictions import Predictions, prediction_html
from bertviz_lab.widgets.panels.text_run import run_text

TEXT, TEXT_B = "The cat sat on the mat because it was warm.", "The dog ran home."


@contextlib.contextmanager
def counting(model: torch.nn.Module) -> Iterator[list[torch.Tensor]]:
    """The input_ids of every forward of `model` run inside the block."""
    seen: list[torch.Tensor] = []

    def hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        seen.append((kwargs.get("input_ids") if "input_ids" in kwargs else args[0]).detach().cpu().clone())

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()


@pytest.fixture(scope="module")
def classifier(minilm_tokenizer) -> BERTForSequenceClassification:
    torch.manual_seed(6)
    return BERTForSequenceClassification(tiny_config(minilm_tokenizer.vocab_size, num_labels=3,
                                                      id2label={0: "calm", 1: "tense", 2: "odd"})).eval()


@pytest.fixture(scope="module")
def tagger(minilm_tokenizer) -> BERTForTokenClassification:
    torch.manual_seed(7)
    return BERTForTokenClassification(tiny_config(minilm_tokenizer.vocab_size, num_labels=2, id2label={0: "O", 1: "X"}))


@pytest.mark.parametrize("name", ["classifier", "tagger", "backbone"])
def test_one_forward_per_text_and_per_device_move(name, request, minilm_tokenizer):
    model = request.getfixturevalue(name)
    with counting(model) as seen:
        bench = Workbench(model, minilm_tokenizer, text=TEXT)
        assert len(seen) == 1
        bench.text_box.value, bench.text_b_box.value = "Dogs bark at night.", TEXT_B
        bench.run_button.click()
        assert bench.error.value == "" and len(seen) == 2
        assert seen[1].tolist() == bench.attention.trace.input_ids.tolist()
        bench.device.move_to("cpu")
        assert len(seen) == 3 and seen[2].tolist() == seen[1].tolist()
        bench.text_box.value = "   "
        bench.run()  # an empty text: an error, and no forward
        assert "empty" in bench.error.value and len(seen) == 3


def test_with_an_mlm_head_only_the_masked_copy_runs_again(pretraining_model, minilm_tokenizer):
    with counting(pretraining_model) as seen:
        bench = Workbench(pretraining_model, minilm_tokenizer, text=TEXT, text_b=TEXT_B)
        unmasked = bench.attention.trace.input_ids
        assert len(seen) == 2  # the shared forward, then the masking preview's on its masked copy
        assert seen[0].tolist() == unmasked.tolist() and seen[1].tolist() == bench.masking.masked_ids.tolist()
        bench.masking.probability.value = 0.5  # resampling the masking runs the masked copy alone
        assert len(seen) == 3 and seen[2].tolist() == bench.masking.masked_ids.tolist()
        bench.run()
        assert len(seen) == 5 and seen[3].tolist() == unmasked.tolist()


def test_the_panels_show_what_they_show_on_their_own(pretraining_model, minilm_tokenizer):
    bench = Workbench(pretraining_model, minilm_tokenizer, text=TEXT, text_b=TEXT_B, layer=2, head=1)
    alone, truncation = trace_text(pretraining_model, minilm_tokenizer, TEXT, TEXT_B)
    assert bench.attention.trace.tokens == alone.tokens and bench.attention.truncation == truncation
    for shared, own in zip(bench.attention.trace.attentions, alone.attentions, strict=True):
        torch.testing.assert_close(shared, own)
    attention = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT, text_b=TEXT_B, layer=2,
                               head=1)
    assert bench.attention.to_svg() == attention.to_svg()
    assert bench.predictions.value == prediction_html(pretraining_model, minilm_tokenizer, TEXT, TEXT_B) != ""
    masking = MaskingPreview(minilm_tokenizer, TEXT, model=pretraining_model, text_b=TEXT_B)
    assert bench.masking.next_sentence == pytest.approx(masking.next_sentence, abs=1e-6)
    assert bench.masking.static_html() == masking.static_html()
    architecture = ArchitecturePanel(pretraining_model, inputs=encode_text(pretraining_model, minilm_tokenizer, TEXT,
                                                                           TEXT_B)[1])
    assert str(bench.architecture.diagram("mermaid")) == str(architecture.diagram("mermaid"))
    assert bench.architecture.table.value == architecture.table.value


@pytest.mark.parametrize("name", ["classifier", "tagger"])
def test_the_prediction_line_reads_the_shared_output(name, request, minilm_tokenizer):
    model = request.getfixturevalue(name)
    run = run_text(model, minilm_tokenizer, TEXT, TEXT_B)
    with counting(model) as seen:
        line = Predictions(model, minilm_tokenizer, TEXT, run=run)
    assert seen == [] and line.value == prediction_html(model, minilm_tokenizer, TEXT, TEXT_B) != ""
    assert (line.text, line.text_b) == (TEXT, TEXT_B)
    line.rerun()  # on its own again: it runs the model itself
    assert line.value == prediction_html(model, minilm_tokenizer, TEXT, TEXT_B)


def test_the_masking_tab_reads_another_models_run_anew(pretraining_model, mlm_model, minilm_tokenizer):
    run = run_text(pretraining_model, minilm_tokenizer, TEXT, TEXT_B)
    preview = MaskingPreview(minilm_tokenizer, "Something else.", model=mlm_model)
    preview.show_run(run)  # not its model: tokenized and predicted with its own
    assert preview.text == TEXT and preview.model is mlm_model and preview.predictions()
    assert preview.inputs["input_ids"].tolist() == run.encoded.inputs["input_ids"].tolist()


def test_one_encode_function_for_widgets_and_heads(minilm_tokenizer, pretraining_model):
    assert encode_text is model_encode_text
    encoded = encode_text(pretraining_model, minilm_tokenizer, TEXT, TEXT_B)
    assert encoded.encoding is encoded[0] and encoded.inputs is encoded[1]
    assert set(encoded.inputs) == {"input_ids", "attention_mask", "token_type_ids"}
    assert "special_tokens_mask" in encoded.encoding
    assert pretraining_model._encode(minilm_tokenizer, TEXT, TEXT_B).keys() == encoded.encoding.keys()
    for key, value in pretraining_model._encode(minilm_tokenizer, TEXT, TEXT_B).items():
        assert torch.equal(value, encoded.encoding[key]), key


def test_the_heads_text_helpers_read_the_same_batch_but_never_cut_it(minilm_tokenizer, pretraining_model):
    long_text = " ".join(["word"] * 200)  # 202 tokens; the model reads 128
    # a panel cuts it, and says so
    assert encode_text(pretraining_model, minilm_tokenizer, long_text).truncation.kept == 128
    with pytest.raises(ValueError, match="202 tokens long .* at most 128"):
        pretraining_model.get_loss_from_text(minilm_tokenizer, long_text)  # a loss on part of the text would mislead
    with pytest.raises(ValueError, match="empty"):
        pretraining_model.predict_nsp_labels_from_text(minilm_tokenizer, "  ", TEXT_B)


def test_a_run_waits_while_another_thread_holds_the_model(backbone, minilm_tokenizer):
    """A saliency worker and the notebook's runs hold one lock per model: a run never overlaps another panel's."""
    import threading

    from bertviz_lab.widgets.panels.running import model_lock
    from bertviz_lab.widgets.panels.text_run import run_text

    held, release, done = threading.Event(), threading.Event(), threading.Event()

    def worker() -> None:
        with model_lock(backbone):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=worker)
    holder.start()
    held.wait(10)
    runner = threading.Thread(target=lambda: (run_text(backbone, minilm_tokenizer, "the cat sat"), done.set()))
    runner.start()
    assert not done.wait(0.3)  # blocked behind the worker
    release.set()
    holder.join(10)
    runner.join(10)
    assert done.is_set()
