"""bertviz's one-line neuron view, `show(model, model_type, tokenizer, sentence_a, ...)`: the attention panel on its
neuron view for a bertviz_lab model, and for a transformers model and tokenizer read into this package's classes
(the softmax row equal to transformers' own attentions); the offline page; bad arguments in one line."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from family_models import build_family_checkpoint
from widgets_testlib import XSS, assert_safe_html

from bertviz_lab.views.neuron_view import show
from bertviz_lab.widgets import AttentionPanel
from bertviz_lab.widgets.figures.theme import background

transformers = pytest.importorskip("transformers")
SVG = "{http://www.w3.org/2000/svg}"


def test_our_model_opens_the_panel_on_its_neuron_view(pretraining_model, minilm_tokenizer):
    panel = show(pretraining_model, "bert", minilm_tokenizer, "The cat sat on the mat.", "It was warm.", layer=2,
                 head=3)
    assert isinstance(panel, AttentionPanel) and panel.view.value == "neuron view"
    assert (panel.layer.value, panel.head.value) == (2, 3) and panel.model is pretraining_model
    tokens = panel.trace.tokens[0]
    assert tokens[-5:] == ["it", "was", "warm", ".", "[SEP]"]  # the pair, as bertviz's sentence_b
    rows = panel.neuron_view.rows()
    query = panel.query.value
    np.testing.assert_allclose(rows.weights, panel.trace.attention(2)[0, 3, query].numpy(), atol=1e-5)
    first = show(pretraining_model, "bert", minilm_tokenizer, "The cat sat.")
    assert (first.layer.value, first.head.value) == (0, 0)  # bertviz's defaults


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_a_transformers_model_and_tokenizer_give_transformers_attention(tmp_path, family):
    if family == "bert":
        torch.manual_seed(3)
        config = transformers.BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=64)
        folder = tmp_path / "bert"
        transformers.BertModel(config).save_pretrained(folder)
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".", "it", "was"]
        (folder / "vocab.txt").write_text("\n".join(vocab + [f"w{i}" for i in range(1000 - len(vocab))]) + "\n")
        transformers.BertTokenizerFast(str(folder / "vocab.txt")).save_pretrained(folder)
    else:
        folder = build_family_checkpoint(family, tmp_path / family, head="model", seed=4)
    model = transformers.AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    panel = show(model, family, tokenizer, "The cat sat on the mat.", layer=1, head=2)
    encoded = tokenizer("The cat sat on the mat.", return_tensors="pt")
    with torch.no_grad():
        reference = model(**encoded, output_attentions=True).attentions[1][0, 2]
    assert panel.trace.tokens[0] == tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    for query in (0, 3):
        panel.query.value = query
        np.testing.assert_allclose(panel.neuron_view.rows().weights, reference[query].numpy(), atol=1e-5)


def test_html_action_return_is_an_offline_page_of_the_figure(pretraining_model, minilm_tokenizer):
    page = show(pretraining_model, "bert", minilm_tokenizer, f"The cat {XSS} sat.", layer=1, head=1,
                html_action="return")
    html = page.data
    assert html.startswith("<!DOCTYPE html>") and "default-src 'none'" in html and "<script" not in html
    assert_safe_html(html, must_show=None)
    svg = html[html.index("<svg"): html.index("</svg>") + 6]
    root = ET.fromstring(svg)
    assert root.get("class") == "bvl-fig bvl-neuron" and root.get("data-title").startswith("layer 1 · head 1")
    assert f"background: {background('dark')};" in html  # bertviz's default: dark
    light = show(pretraining_model, "bert", minilm_tokenizer, "The cat sat.", display_mode="light",
                 html_action="return").data
    assert f"background: {background('light')};" in light


@pytest.mark.parametrize("call, message", [
    (dict(model_type="gpt2"), "model_type is 'gpt2' but the model is a bert model; pass model_type='bert'"),
    (dict(display_mode="dim"), "display_mode must be 'dark' or 'light', got 'dim'"),
    (dict(html_action="show"), "html_action must be one of ('view', 'return'), got 'show'"),
    (dict(sentence_a=["The", "cat"]), "sentence_a and sentence_b must be strings"),
    (dict(model="bert-base-uncased"), "model must be a bertviz_lab model (bertviz_lab.load(name)) or a transformers"),
])
def test_bad_arguments_are_one_line(pretraining_model, minilm_tokenizer, call, message):
    arguments = dict(model=pretraining_model, model_type="bert", tokenizer=minilm_tokenizer, sentence_a="The cat.")
    with pytest.raises((TypeError, ValueError)) as error:
        show(**{**arguments, **call})
    assert message in str(error.value) and "\n" not in str(error.value)
