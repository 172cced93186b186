"""Workbench and open_view: the tabs around one text, Run, device moves, the default pretrained model, every view."""

from __future__ import annotations

import re
from html import unescape

import numpy as np
import pytest
import torch

from bertviz_lab.model import BERT
from bertviz_lab.widgets import (
    ArchitecturePanel,
    AttentionPanel,
    DevicePicker,
    MaskingPreview,
    TrainingPanel,
    Workbench,
    open_view,
)
from bertviz_lab.widgets.panels.workbench import DEFAULT_TEXT
from bertviz_lab.widgets.views.front_end import all_css


@pytest.fixture
def bench(pretraining_model, minilm_tokenizer) -> Workbench:
    return Workbench(pretraining_model, minilm_tokenizer, text="The cat sat on the mat.", layer=1, head=2)


def test_tabs_around_one_text(bench):
    titles = [bench.tabs.get_title(i) for i in range(6)]
    assert titles == ["Attention", "Masking", "Architecture", "Training", "Device", "Causal"]
    assert list(bench.tabs.children) == [bench.attention, bench.masking, bench.architecture, bench.training,
                                         bench.device, bench.causal]
    assert bench.tabs.selected_index == 0
    assert (bench.attention.layer.value, bench.attention.head.value) == (1, 2)
    tokens = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
    assert bench.attention.trace.tokens[0] == tokens
    assert bench.masking.inputs["input_ids"][0].tolist() == bench.attention.trace.input_ids[0].tolist()
    assert bench.architecture.inputs["input_ids"].shape == (1, len(tokens))
    np.testing.assert_allclose(bench.attention.heatmap.weights(), bench.attention.trace.attention(1)[0, 2].numpy(),
                               rtol=2**-11, atol=3e-8)  # float16
    assert Workbench(bench.model, bench.tokenizer, tab="device").tabs.selected_index == 4


def test_run_sends_the_new_text_to_every_panel(bench, minilm_tokenizer):
    old_trace = bench.attention.trace
    bench.text_box.value = "Dogs bark at night."
    bench.text_b_box.value = "  The neighbours complain.  "
    bench.run_button.click()
    assert bench.error.value == ""
    expected = minilm_tokenizer.encode_pretraining_inputs("Dogs bark at night.", "The neighbours complain.")
    ids = expected["input_ids"][0].tolist()
    assert bench.attention.trace is not old_trace
    assert bench.attention.trace.input_ids[0].tolist() == ids and bench.attention.info.has_pair
    assert bench.attention.trace.tokens[0][:3] == ["[CLS]", "dogs", "bark"]
    assert bench.masking.inputs["input_ids"][0].tolist() == ids
    assert bench.masking.plan.eligible.shape == (1, len(ids)) and bench.masking.predictions()  # an MLM head
    assert f"(1,{len(ids)}) → (1,{len(ids)},128)" in str(bench.architecture.diagram())
    np.testing.assert_allclose(bench.attention.heatmap.weights(), bench.attention.trace.attention(1)[0, 2].numpy(),
                               rtol=2**-11, atol=3e-8)
    assert bench.attention.direction.disabled is False
    # back to one sentence
    bench.text_b_box.value = ""
    bench.run()
    assert not bench.attention.info.has_pair and bench.attention.direction.disabled


def test_run_with_an_empty_text_shows_the_error(bench):
    trace = bench.attention.trace
    bench.text_box.value = "   "
    bench.run_button.click()
    error = bench.error.value
    assert "empty" in error and "class='bvl-error'" in error and "style=" not in error
    assert bench.attention.trace is trace  # the panels keep the last good text
    bench.text_box.value = "Fine again."
    bench.run()
    assert bench.error.value == ""


def test_a_device_move_reruns_the_panels(bench):
    attention, architecture = bench.attention.trace, bench.architecture.trace
    bench.device.move_to("cpu")
    assert bench.attention.trace is not attention and bench.architecture.trace is not architecture
    assert bench.attention.trace.tokens == attention.tokens


def test_static_fallback(bench):
    static = bench._repr_mimebundle_()["text/html"]
    assert static == bench.static_html()
    assert "bvl-attention" in static and "bvl-masking" in static and "The cat sat on the mat." in static


def test_the_panels_html_takes_its_colours_from_the_stylesheet(bench):
    """No inline colours (light ones made bright boxes in a dark theme): classes of views/panels.css, which every
    static copy and the panels' views carry."""
    inline_colour = re.compile(r"style=[\"'][^\"']*(color|background|#[0-9a-fA-F]{3})", re.I)
    pieces = {name: bench.panels()[name].static_html() for name in ("masking", "architecture", "device")}
    pieces |= {"predictions": bench.predictions.value, "training": bench.training.message.value,
               "devices": bench.device.status.value, "masking view": bench.masking.view.svg}
    for name, html in pieces.items():
        assert not inline_colour.search(html), name
    assert "bvl-chip" in pieces["masking"] and "bvl-table" in pieces["device"]
    assert ".bvl-error {" in all_css() and ".bvl-chip.bvl-mask {" in all_css()


def test_model_and_tokenizer_go_together(pretraining_model):
    with pytest.raises(TypeError, match="both"):
        Workbench(pretraining_model)
    with pytest.raises(ValueError, match="tab"):
        Workbench(tab="everything")


def test_no_arguments_opens_the_pretrained_minilm():
    bench = Workbench()
    assert isinstance(bench.model, BERT) and bench.model.config.num_hidden_layers == 6
    assert bench.text_box.value == DEFAULT_TEXT
    attentions = bench.attention.trace.attentions
    assert len(attentions) == 6 and attentions[0].shape[1] == 12
    assert bench.attention.trace.tokens[0][:4] == ["[CLS]", "the", "cat", "sat"]
    assert bench.masking.predictions() == []  # the sentence-embedding checkpoint has no MLM head
    assert bench.model is Workbench().model  # loaded once per session
    # a pretrained model attends differently from head to head: the panel shows real, distinct maps
    maps = attentions[0][0]
    assert not torch.allclose(maps[0], maps[1], atol=1e-3)
    bench.text_box.value = "Paris is the capital of France."
    bench.run()
    assert bench.attention.trace.tokens[0][1:4] == ["paris", "is", "the"] and bench.error.value == ""


@pytest.mark.parametrize("view,kind", [("all", Workbench), ("attention", AttentionPanel),
                                       ("masking", MaskingPreview), ("architecture", ArchitecturePanel),
                                       ("training", TrainingPanel), ("device", DevicePicker)])
def test_open_view_builds_every_view(pretraining_model, minilm_tokenizer, view, kind):
    at = {"layer": 2, "head": 3} if view in ("all", "attention") else {}
    panel = open_view(pretraining_model, minilm_tokenizer, "A short text.", text_b="And a second one.", view=view,
                      device="cpu", **at)
    assert type(panel) is kind
    assert panel.static_html()
    if view in ("all", "attention"):
        attention = panel if view == "attention" else panel.attention
        assert (attention.layer.value, attention.head.value) == (2, 3) and attention.info.has_pair
    if view == "masking":
        assert panel.predictions() and panel.counts["tokens"] == 12


def test_open_view_errors(pretraining_model, minilm_tokenizer):
    with pytest.raises(ValueError, match="view must be one of"):
        open_view(pretraining_model, minilm_tokenizer, "text", view="bogus")
    with pytest.raises(ValueError, match="layer 5 does not exist"):
        open_view(pretraining_model, minilm_tokenizer, "text", view="attention", layer=5)
    with pytest.raises(ValueError, match="cuda:9"):
        open_view(pretraining_model, minilm_tokenizer, "text", view="device", device="cuda:9")


SMALL_RUN = {"data": {"corpus": "builtin", "tokenizer": "minilm", "sequence_length": 32, "batch_size": 8},
             "model": {"preset": "tiny", "dim_model": 32, "num_heads": 2, "dim_ff": 64, "num_layers": 1},
             "training": {"steps": 3, "eval_interval": 0, "device": "cpu"},
             "logging": {"progress": False, "log_interval": 0}}


def test_the_masking_tab_takes_the_training_tabs_model(backbone, minilm_tokenizer):
    bench = Workbench(backbone, minilm_tokenizer, text="The cat sat on the mat.", text_b="It was warm.")
    bench.training.run_config = SMALL_RUN
    masking = bench.masking
    assert masking.predictions() == [] and ("the Training tab's model", "training") in masking.model_choice.options
    assert bench.training.trainer is None  # nothing built before it is chosen
    masking.model_choice.value = "training"
    trainer = bench.training.trainer
    assert trainer is not None and masking.trainer is trainer and bench.training.curves.trainer is trainer
    assert masking.tokenizer is trainer.tokenizer and masking.predictions() and masking.next_sentence is not None
    assert masking.model_choice.value == "training"
    bench.training.start_button.click()  # trains in the background; the masking tab refreshes as it goes
    assert trainer.join(timeout=120) and trainer.step == 3
    assert "Training tab's model (step 3 of 3)" in unescape(masking.view.svg)
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(masking.model.state_dict()[name], value), name
    bench.text_box.value = "Dogs bark at night."
    bench.run()  # the new text reaches the masking tab, read with the training run's tokenizer
    assert bench.error.value == "" and masking.text == "Dogs bark at night." and masking.predictions()


def test_the_header_names_the_model_its_size_and_its_heads(minilm_tokenizer):
    from widgets_testlib import tiny_config

    from bertviz_lab.widgets.panels.model_label import count_text, remember_name
    from bertviz_lab.widgets.panels.models import default_model_and_tokenizer
    from bertviz_lab.widgets.panels.workbench import header_html

    model, _ = default_model_and_tokenizer()
    count = sum(p.numel() for p in model.parameters())
    assert count_text(count) == "22.7 M parameters"  # all-MiniLM-L6-v2's model card: 22.7M parameters
    assert unescape(re.sub("<[^>]+>", "", header_html(model))) == (
        "model: all-MiniLM-L6-v2 · 22.7 M parameters · 6 layers × 12 heads")
    backbone = remember_name(BERT(tiny_config(minilm_tokenizer.vocab_size)).eval(), "<img src=x onerror=alert(1)>")
    bench = Workbench(backbone, minilm_tokenizer, text="The cat sat on the mat.")
    header = bench.model_header.value
    assert "&lt;img src=x onerror=alert(1)&gt;" in header and "<img" not in header
    layers, heads = backbone.config.num_hidden_layers, backbone.config.num_attention_heads
    assert f"{count_text(sum(p.numel() for p in backbone.parameters()))} · {layers} layers × {heads} heads" in header
    assert bench.children[0].children[0] is bench.model_header  # the first line of the workbench
    assert header in bench.static_html()
    assert bench.caption() == "<img src=x onerror=alert(1)> · “The cat sat on the mat.”"
