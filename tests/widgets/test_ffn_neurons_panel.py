"""The FFN neurons figures and panel: the figures draw the numbers they are given (one cell per neuron, token or
corpus text, hover text exact to the float, tokens escaped, colours from the theme), and the panel shows exactly the
hook point `intermediate.act` of one forward, re-sliced without running the model again."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from family_models import build_family_checkpoint
from widgets_testlib import XSS

import bertviz_lab
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.export import themed
from bertviz_lab.widgets.figures.ffn_neurons import (
    corpus_texts_svg,
    exact,
    neuron_text_svg,
    top_neurons_svg,
)
from bertviz_lab.widgets.panels.ffn_neurons import FFNNeuronsPanel
from bertviz_lab.widgets.views.front_end import all_css

TEXT = "The capital of France is Paris."
SVG = "{http://www.w3.org/2000/svg}"
WHITE, DARKEST = "#%02x%02x%02x" % tuple(D.PALETTE[0]), "#%02x%02x%02x" % tuple(D.PALETTE[D.TOP_CODE])


def cells(svg: str) -> list[ET.Element]:
    """The figure's cells (class bvl-cell), in document order."""
    root = ET.fromstring(svg)
    return [el for el in root.iter() if "bvl-cell" in (el.get("class") or "").split()]


def tip_value(tip: str) -> float:
    return float(re.search(r"activation (\S+)", tip).group(1))


def assert_themed(svg: str) -> None:
    """Text takes its colour from the theme (figure.css) or the ink class of the fill it sits on: no text carries a
    literal colour, and no element a style."""
    root = ET.fromstring(svg)
    for el in root.iter(f"{SVG}text"):
        assert el.get("fill") is None and el.get("style") is None, ET.tostring(el)
    assert "style=" not in svg and "color:" not in svg


class FakeCorpus:
    """What the panel reads of a Corpus: top_neuron_texts(layer, neuron, k) and text(text_id)."""

    def __init__(self, maxima: bool = True) -> None:
        self.maxima, self.asked = maxima, []

    def top_neuron_texts(self, layer: int, neuron: int, k: int = 5) -> pd.DataFrame:
        self.asked.append((layer, neuron, k))
        if not self.maxima:
            raise ValueError("this corpus stores no neuron maxima: run analyze(..., neurons=...) to store them.")
        return pd.DataFrame({"text_id": [7, 2], "position": [3, 1], "token": ["paris", XSS],
                             "activation": np.array([2.5, 0.75], np.float32), "left": ["the capital of", ""],
                             "right": ["is big .", "cat sat"]})

    def text(self, text_id: int) -> tuple[str, str | None]:
        return {7: ("The capital is paris.", None), 2: (f"A {XSS} cat sat.", "It stayed.")}[text_id]


# the figures ---------------------------------------------------------------------------------------------------------
def test_top_neurons_figure_has_a_cell_per_neuron_with_the_exact_value():
    values = np.array([3.141593, 0.5, -0.0123456789], np.float32)
    svg = top_neurons_svg([1432, 7, 3], values, layer=2, position=5, token="paris", selected=7)
    found = cells(svg)
    assert [c.get("data-neuron") for c in found] == ["1432", "7", "3"]
    assert [(c.get("data-row"), c.get("data-col")) for c in found] == [("0", "0"), ("1", "0"), ("2", "0")]
    assert found[0].get("data-tip") == "layer 2 · neuron 1432 · at 5·paris · activation 3.141593"
    for cell, value in zip(found, values):
        assert np.float32(tip_value(cell.get("data-tip"))) == value  # the float itself, not a rounding of it
        assert cell.find(f"{SVG}title").text == cell.get("data-tip")
    mark = ET.fromstring(svg).find(f".//{SVG}g[@class='bvl-selected-cell']")
    assert mark is not None and mark.get("data-row") == "1"
    assert_themed(svg)


def test_neuron_text_figure_colours_each_token_on_a_scale_clipped_at_zero():
    tokens = ["[CLS]", "the", XSS, "paris", "[SEP]"]
    values = np.array([-0.1, 0.0, 1.0, 2.0, 0.25], np.float32)
    svg = neuron_text_svg(tokens, values, layer=1, neuron=42, selected_position=3, scale_top=2.0)
    found = cells(svg)
    assert [int(c.get("data-col")) for c in found] == list(range(5))
    assert {c.get("data-row") for c in found} == {"0"}
    assert found[3].get("data-tip") == "layer 1 · neuron 42 · 3·paris · activation 2.0"
    assert found[2].get("data-tip") == f"layer 1 · neuron 42 · 2·{XSS} · activation 1.0"
    assert [np.float32(tip_value(c.get("data-tip"))) for c in found] == list(values)
    fills = [c.find(f"{SVG}rect").get("fill") for c in found]
    assert fills[0] == fills[1] == WHITE and fills[3] == DARKEST  # below 0 as 0; the top of the scale darkest
    assert XSS not in svg and "&lt;img src=x onerror=alert(1)&gt;" in svg
    assert_themed(svg)


def test_neuron_text_wraps_long_texts_and_walks_them_in_reading_order():
    tokens = [f"token{i}" for i in range(80)]
    found = cells(neuron_text_svg(tokens, np.arange(80, dtype=np.float32), layer=0, neuron=1))
    lines = [int(c.get("data-line")) for c in found]
    assert lines == sorted(lines) and lines[-1] >= 2  # wrapped, in order
    assert [int(c.get("data-col")) for c in found] == list(range(80))


def test_figures_say_in_one_line_what_is_wrong():
    with pytest.raises(ValueError, match="2 tokens, 3 activations"):
        neuron_text_svg(["a", "b"], [1.0, 2.0, 3.0], layer=0, neuron=0)
    with pytest.raises(ValueError, match="2 neurons, 1 activations"):
        top_neurons_svg([1, 2], [1.0], layer=0, position=0, token="a")
    with pytest.raises(ValueError, match="no column 'activation'"):
        corpus_texts_svg(pd.DataFrame({"text_id": [1], "position": [0], "token": ["a"]}), layer=0, neuron=0)


def test_corpus_texts_figure_lists_each_text_as_a_cell():
    rows = FakeCorpus().top_neuron_texts(1, 5)
    svg = corpus_texts_svg(rows, layer=1, neuron=5, selected=1)
    found = cells(svg)
    assert [(c.get("data-row"), c.get("data-text-id"), c.get("data-position")) for c in found] == \
        [("0", "7", "3"), ("1", "2", "1")]
    assert found[0].get("data-tip") == "text 7 · 3·paris · activation 2.5 · the capital of [paris] is big ."
    assert XSS not in svg
    assert_themed(svg)


def test_exact_reads_back_as_the_same_float():
    for value in np.array([3.1415927, -0.16997, 1e-7, 12345.678], np.float32):
        assert np.float32(exact(value)) == value
    assert exact(3.141593) == "3.141593"


# the panel ----------------------------------------------------------------------------------------------------------
@pytest.fixture
def counted(mlm_model):
    """The MLM model with a counter of its forward passes."""
    calls = []
    handle = mlm_model.register_forward_hook(lambda *args: calls.append(1))
    yield mlm_model, calls
    handle.remove()


def reference(model, tokenizer, text: str):
    batch = tokenizer([text], return_tensors="pt")
    with torch.no_grad():
        _, cache = model.run_with_cache(**batch, names_filter=lambda name: name.endswith(("intermediate.act",
                                                                                          "resid_mid")))
    return cache


def test_panel_shows_the_hook_points_values(mlm_model, minilm_tokenizer):
    panel = FFNNeuronsPanel(mlm_model, minilm_tokenizer, text=TEXT, layer=1, position=6)
    cache = reference(mlm_model, minilm_tokenizer, TEXT)
    layers = mlm_model.config.num_hidden_layers
    assert panel.activations.shape == (layers, 9, mlm_model.config.intermediate_size)
    for layer in range(layers):
        torch.testing.assert_close(panel.activations[layer], cache[f"bert.encoder.layer.{layer}.intermediate.act"][0],
                                   rtol=0, atol=1e-6)
    # and by hand from the weights: GELU(x W1 + b1) of what the feed-forward reads
    dense = mlm_model.bert.encoder.layer[1].intermediate.dense
    by_hand = torch.nn.functional.gelu(cache["bert.encoder.layer.1.resid_mid"][0] @ dense.weight.T + dense.bias)
    torch.testing.assert_close(panel.layer_activations(1), by_hand, rtol=1e-5, atol=1e-5)
    # the top neurons are the true top k, drawn with their exact values
    at_token = panel.activations[1, 6].numpy()
    neurons, _ = panel.top_neurons()
    assert sorted(at_token[neurons].tolist(), reverse=True) == sorted(at_token, reverse=True)[:10]
    found = cells(panel.top_view.svg)
    assert [int(c.get("data-neuron")) for c in found] == neurons
    assert [np.float32(tip_value(c.get("data-tip"))) for c in found] == [at_token[n] for n in neurons]
    assert panel.chosen_neuron == neurons[0] == panel.neuron.value  # default: the most active at the token
    text_cells = cells(panel.text_view.svg)
    assert [np.float32(tip_value(c.get("data-tip"))) for c in text_cells] == \
        panel.activations[1, :, neurons[0]].tolist()
    assert panel.top_view.title == "layer 1 · the most active neurons at 6·paris"


def test_choosing_a_layer_token_neuron_or_k_runs_no_forward(counted, minilm_tokenizer):
    model, calls = counted
    panel = FFNNeuronsPanel(model, minilm_tokenizer, text=TEXT)
    assert len(calls) == 1 and panel.forwards == 1
    panel.set(layer=1, position=2, neuron=17, k=4)
    assert panel.text_view.title == "layer 1 · neuron 17 over the text" and len(cells(panel.top_view.svg)) == 4
    panel.layer.value = 0
    panel.position.value = 4
    panel.k.value = 6
    panel.top_view.open_cell(2, 0)  # a click on the third neuron's bar chooses it
    third = panel.top_neurons()[0][2]
    assert panel.chosen_neuron == third and panel.neuron.value == third
    panel.text_view.open_cell(0, 5)  # a click on a token chooses the token
    assert panel.position.value == 5 and panel.text_view.selected == [0, 5]
    assert panel.top_view.title.endswith("at 5·is")
    assert len(calls) == 1 and panel.forwards == 1
    panel.set_text("Another text.")
    assert len(calls) == 2 and panel.chosen_neuron == third  # a chosen neuron stays


def test_one_line_errors_name_the_range(mlm_model, minilm_tokenizer):
    panel = FFNNeuronsPanel(mlm_model, minilm_tokenizer, text=TEXT)
    width, layers = mlm_model.config.intermediate_size, mlm_model.config.num_hidden_layers
    with pytest.raises(ValueError, match=rf"^neuron {width} does not exist; each layer has neurons 0..{width - 1}\.$"):
        panel.set(neuron=width)
    with pytest.raises(ValueError, match=rf"^layer 9 does not exist; this model has layers 0..{layers - 1}\.$"):
        panel.set(layer=9)
    with pytest.raises(ValueError, match="position 99 does not exist"):
        panel.set(position=99)
    before = panel.top_view.svg
    panel.neuron.value = -1  # typed in the control: one line in the panel, nothing raised, nothing redrawn
    assert panel.message.value.count("<span") == 1 and "neurons 0..511" in panel.message.value
    assert "\n" not in panel.message.value and panel.top_view.svg == before
    with pytest.raises(ValueError, match="^k must be from 1 to 512"):
        FFNNeuronsPanel(mlm_model, minilm_tokenizer, text=TEXT, k=0)


def test_the_corpus_list_appears_and_opens_its_texts(mlm_model, minilm_tokenizer):
    corpus = FakeCorpus()
    panel = FFNNeuronsPanel(mlm_model, minilm_tokenizer, text=TEXT, layer=1, neuron=5)
    assert panel.corpus_view.layout.display == "none" and panel.corpus_view.svg == ""
    panel.set_corpus(corpus)
    assert corpus.asked == [(1, 5, 5)] and panel.corpus_view.layout.display == ""
    assert [c.get("data-text-id") for c in cells(panel.corpus_view.svg)] == ["7", "2"]
    opened = []
    panel.on_open_text(lambda *args: opened.append(args))
    panel.corpus_view.open_cell(1, 0)
    assert opened == [(f"A {XSS} cat sat.", "It stayed.", 1, 1)]
    assert ET.fromstring(panel.corpus_view.svg).find(f".//{SVG}g[@class='bvl-selected-cell']").get("data-row") == "1"
    panel.set(position=2)
    assert corpus.asked == [(1, 5, 5)]  # the same layer and neuron: read once


def test_a_corpus_text_opens_in_the_panel_without_a_callback(mlm_model, minilm_tokenizer):
    panel = FFNNeuronsPanel(mlm_model, minilm_tokenizer, text=TEXT, layer=1, neuron=5, corpus=FakeCorpus())
    panel.open_corpus_text(0)
    assert panel.text == "The capital is paris." and panel.position.value == 3 and panel.chosen_neuron == 5
    assert panel.forwards == 2


def test_a_corpus_without_neuron_maxima_says_so_in_one_line(mlm_model, minilm_tokenizer):
    panel = FFNNeuronsPanel(mlm_model, minilm_tokenizer, text=TEXT, corpus=FakeCorpus(maxima=False))
    assert panel.corpus_view.svg == "" and "analyze(..., neurons=...)" in panel.corpus_view.message
    assert "\n" not in panel.corpus_view.message


def test_to_svg_stacks_the_drawings_on_screen(mlm_model, minilm_tokenizer, tmp_path):
    panel = FFNNeuronsPanel(mlm_model, minilm_tokenizer, text=f"The {XSS} sat.", corpus=FakeCorpus())
    drawing = panel.to_svg()
    root = ET.fromstring(drawing)
    assert "bvl-fig" in root.get("class")
    nested = root.findall(f"{SVG}svg")
    assert len(nested) == 3
    for inner, view in zip(nested, (panel.top_view, panel.text_view, panel.corpus_view)):
        assert view.svg[len("<svg "):] in drawing  # each view's very drawing, placed
        assert inner.get("width") == ET.fromstring(view.svg).get("width")
    assert XSS not in drawing
    assert [float(inner.get("y")) for inner in nested] == sorted(float(inner.get("y")) for inner in nested)
    assert drawing in panel.static_copy.html()  # the notebook's static copy holds the same drawing
    assert Path(panel.save(tmp_path / "x.svg")).read_text(encoding="utf-8") == themed(drawing, all_css(), "light")
    panel.close()
    with pytest.raises(ValueError, match="closed"):
        panel.activations


def test_a_backbone_without_a_head_works(backbone, minilm_tokenizer):
    panel = FFNNeuronsPanel(backbone, minilm_tokenizer, text=TEXT, layer=2)
    cache = reference(backbone, minilm_tokenizer, TEXT)
    torch.testing.assert_close(panel.layer_activations(2), cache["encoder.layer.2.intermediate.act"][0],
                               rtol=0, atol=1e-6)
    assert panel.message.value == "" and cells(panel.text_view.svg)


@pytest.mark.parametrize("family", ["roberta", "distilbert"])
def test_other_families(family, tmp_path):
    model, tokenizer = bertviz_lab.load(build_family_checkpoint(family, tmp_path / family, head="model", seed=2))
    panel = FFNNeuronsPanel(model, tokenizer, text="The cat sat on the mat.", layer=1)
    cache = reference(model, tokenizer, "The cat sat on the mat.")
    (name,) = [name for name in cache if name.endswith("encoder.layer.1.intermediate.act")]
    torch.testing.assert_close(panel.layer_activations(1), cache[name][0], rtol=0, atol=1e-6)
    assert panel.tokens == tokenizer.convert_ids_to_tokens(tokenizer("The cat sat on the mat.")["input_ids"])


def test_set_model_keeps_the_text(mlm_model, backbone, minilm_tokenizer):
    panel = FFNNeuronsPanel(mlm_model, minilm_tokenizer, text=TEXT, layer=2, neuron=3)
    panel.set_model(backbone, minilm_tokenizer)
    cache = reference(backbone, minilm_tokenizer, TEXT)
    torch.testing.assert_close(panel.layer_activations(2), cache["encoder.layer.2.intermediate.act"][0],
                               rtol=0, atol=1e-6)
    assert panel.layer.value == 2 and panel.chosen_neuron == 3 and panel.forwards == 2
