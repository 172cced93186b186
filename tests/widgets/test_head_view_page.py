"""head_view(..., html_action="return"), bertviz's page whole: every layer of every attention set with every query,
a layer switch, an attention switch and a check box per head (radio buttons and check boxes with CSS, no script),
hover rules for every row; the lines drawn are each query's strongest keys, their opacity the weight."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
import torch
from widgets_testlib import XSS, assert_safe_html

from bertviz_lab import views
from bertviz_lab.views.head_view_page import PAGE_K, PAGE_MIN_WEIGHT

SVG = "{http://www.w3.org/2000/svg}"
FIGURE = re.compile(r"<div class='bvl-figure bvl-attention bvl-page-figure' data-set=\"(\d+)\" "
                    r"data-layer-index=\"(\d+)\" data-layer=\"(-?\d+)\">(<svg.*?</svg>)</div>", re.S)


def attentions(layers: int, heads: int, tokens: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Peaked random attention, as trained heads are: each row a softmax of scaled noise."""
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.softmax(torch.randn(1, heads, tokens, tokens, generator=generator) * 4, dim=-1)
                 for _ in range(layers))


def figures(page: str) -> dict[tuple[int, int], ET.Element]:
    return {(int(s), int(layer)): ET.fromstring(svg) for s, _, layer, svg in FIGURE.findall(page)}


def drawn_lines(figure: ET.Element, strongest: float) -> dict[tuple[int, int], dict[int, float]]:
    """{(head, query): {key: weight read back from the line's opacity}}."""
    lines: dict[tuple[int, int], dict[int, float]] = {}
    for group in figure.iter(f"{SVG}g"):
        if group.get("class") != "bvl-head-lines":
            continue
        head = int(group.get("data-head"))
        for row in group:
            lines[head, int(row.get("data-q"))] = {int(line.get("data-key")): float(line.get("stroke-opacity")) *
                                                  strongest for line in row}
    return lines


def test_600_tokens_every_layer_every_query_and_the_weights_of_the_attentions():
    tokens = [f"t{i}" for i in range(600)]
    tokens[7] = XSS
    attention = attentions(layers=3, heads=4, tokens=600)
    page = views.head_view(attention, tokens, layer=1, html_action="return").data
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "default-src 'none'" in page
    assert_safe_html(page, must_show=None)
    drawn = figures(page)
    assert sorted(drawn) == [(0, 0), (0, 1), (0, 2)]
    for (_, layer), figure in drawn.items():
        queries = [t for t in figure.iter(f"{SVG}text") if t.get("data-side") == "query"]
        keys = [t for t in figure.iter(f"{SVG}text") if t.get("data-side") == "key"]
        assert [int(t.get("data-index")) for t in queries] == list(range(600)) == [int(t.get("data-index"))
                                                                                 for t in keys]
        weights = attention[layer][0].double()
        top_k, top_index = weights.topk(PAGE_K, dim=-1)
        strongest = float(top_k.max())
        lines = drawn_lines(figure, strongest)
        expected = {(h, q): {int(k): float(w) for k, w in zip(top_index[h, q], top_k[h, q]) if w >= PAGE_MIN_WEIGHT}
                    for h in range(4) for q in range(600)}
        expected = {where: keys for where, keys in expected.items() if keys}
        assert lines.keys() == expected.keys(), f"layer {layer}"
        for where, keys in expected.items():
            assert lines[where].keys() == keys.keys(), (layer, where)
            for key, weight in keys.items():  # opacity = weight / strongest, to three decimals
                assert lines[where][key] == pytest.approx(weight, abs=5e-4 * strongest), (layer, where, key)
    # the layer switch: one radio per layer, the layer asked for checked; one rule shows each figure
    radios = re.findall(r'<input type="radio" name="bvl-layer" id="bvl-layer-(\d)" value="\d"( checked)?>', page)
    assert radios == [("0", ""), ("1", " checked"), ("2", "")]
    for index in range(3):
        assert (f'body:has(#bvl-set-0:checked):has(#bvl-layer-{index}:checked) .bvl-page-figure[data-set="0"]'
                f'[data-layer-index="{index}"] {{ display: block; }}') in page
    # hover: a rule per row singles out a query's lines, and the lines that end at a key
    for row in (0, 599):
        assert f'text.bvl-query[data-index="{row}"]:hover) .bvl-head-lines > g:not([data-q="{row}"])' in page
        assert f'text.bvl-key[data-index="{row}"]:hover) .bvl-head-lines line:not([data-key="{row}"])' in page
    assert len(page) < 8_000_000, len(page)  # a few MB; every weight as text would be ~40 MB


def test_heads_are_check_boxes_and_a_pair_gets_the_attention_switch():
    tokens = ["[CLS]", "the", "cat", "[SEP]", "it", "sat", "[SEP]"]
    attention = attentions(layers=2, heads=3, tokens=len(tokens), seed=1)
    page = views.head_view(attention, tokens, sentence_b_start=4, heads=[0, 2], html_action="return").data
    boxes = re.findall(r'<input type="checkbox" id="bvl-head-(\d)" value="\d"( checked)?>', page)
    assert boxes == [("0", " checked"), ("1", ""), ("2", " checked")]
    assert 'body:has(#bvl-head-1:not(:checked)) .bvl-head-lines[data-head="1"] { display: none; }' in page
    sets = re.findall(r'<input type="radio" name="bvl-set" id="bvl-set-(\d)" value="\d"( checked)?><label '
                      r'for="bvl-set-\d">([^<]*)</label>', page)
    assert [name for _, _, name in sets] == ["all", "sentence A → sentence A", "sentence B → sentence B",
                                             "sentence A → sentence B", "sentence B → sentence A"]
    drawn = figures(page)
    assert sorted(drawn) == [(s, layer) for s in range(5) for layer in range(2)]
    a_to_b = drawn[3, 1]  # rows: sentence A, columns: sentence B
    assert [t.text for t in a_to_b.iter(f"{SVG}text") if t.get("data-side") == "query"] == tokens[:4]
    assert [t.text for t in a_to_b.iter(f"{SVG}text") if t.get("data-side") == "key"] == tokens[4:]


def test_an_encoder_decoder_layer_missing_from_one_attention_says_so():
    encoder = attentions(layers=3, heads=2, tokens=5, seed=2)
    decoder = attentions(layers=2, heads=2, tokens=4, seed=3)
    cross = tuple(torch.softmax(torch.randn(1, 2, 4, 5), dim=-1) for _ in range(2))
    page = views.head_view(encoder_attention=encoder, decoder_attention=decoder, cross_attention=cross,
                           encoder_tokens=list("abcde"), decoder_tokens=list("wxyz"), html_action="return").data
    assert sorted(figures(page)) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert "<p class='bvl-page-missing' data-set=\"1\" data-layer-index=\"2\" data-layer=\"2\">decoder attention " \
           "has no layer 2.</p>" in page


def test_bertvizs_stacked_and_negative_index_calls_give_the_page():
    tokens = [f"w{i}" for i in range(6)]
    attention = attentions(layers=4, heads=2, tokens=6, seed=4)
    stacked = views.head_view(torch.stack(attention), tokens, html_action="return").data
    assert stacked == views.head_view(attention, tokens, html_action="return").data
    page = views.head_view(attention, tokens, include_layers=[-2, -1], layer=3, html_action="return").data
    assert sorted(layer for _, layer in figures(page)) == [2, 3]
    assert re.findall(r'id="bvl-layer-(\d)" value="\d"( checked)?><label for="bvl-layer-\d">(\d)<', page) == [
        ("0", "", "2"), ("1", " checked", "3")]
