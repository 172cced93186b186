"""bertviz's calls (head_view, model_view, heatmap) on the attentions of tiny random GPT-2, BERT, BART and T5 models
built with transformers (offline): the drawings read back equal the weights given, cross attention is drawn as a
decoder × encoder rectangle, and bad input is one line naming the problem."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from attention_figures import head_lines, thumbnails
from attention_figures import tokens as side_tokens
from heatmap_drawing import drawn_as, drawn_colours, near_colours, texts
from widgets_testlib import XSS, assert_safe_html

from bertviz_lab import views
from bertviz_lab.widgets.figures import attention_data as D

transformers = pytest.importorskip("transformers")

GPT2_TOKENS = ["The", "Ġcat", "Ġsat", "Ġon", "Ġthe", "Ġmat"]
BERT_TOKENS = ["[CLS]", "the", "cat", "##s", "[SEP]", "they", "sat", "[SEP]"]
ENCODER_TOKENS = ["▁The", "▁cat", "s", "▁sat", "▁down", "</s>", "<pad>"]
DECODER_TOKENS = ["<pad>", "▁Die", "▁Katze", "n"]


def run(model: torch.nn.Module, **inputs: torch.Tensor):
    with torch.no_grad():
        return model.eval()(**inputs, output_attentions=True)


@pytest.fixture(scope="module")
def gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=100, attn_implementation="eager")
    return run(transformers.GPT2Model(config), input_ids=torch.arange(3, 3 + len(GPT2_TOKENS))[None]).attentions


@pytest.fixture(scope="module")
def bert():
    torch.manual_seed(1)
    config = transformers.BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                                     intermediate_size=32, attn_implementation="eager", initializer_range=1.0)
    ids = torch.arange(5, 5 + len(BERT_TOKENS))[None]
    types = torch.tensor([[0] * 5 + [1] * 3])
    return run(transformers.BertModel(config), input_ids=ids, token_type_ids=types).attentions


@pytest.fixture(scope="module")
def bart():
    torch.manual_seed(2)
    config = transformers.BartConfig(vocab_size=100, d_model=16, encoder_layers=2, decoder_layers=2,
                                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                                     decoder_ffn_dim=32, max_position_embeddings=32, init_std=1.0,
                                     attn_implementation="eager")
    out = run(transformers.BartModel(config), input_ids=torch.arange(4, 4 + len(ENCODER_TOKENS))[None],
              decoder_input_ids=torch.arange(20, 20 + len(DECODER_TOKENS))[None])
    return out.encoder_attentions, out.decoder_attentions, out.cross_attentions


@pytest.fixture(scope="module")
def t5():
    """A T5 with 2 encoder and 3 decoder layers: the layer choice follows the attention chosen."""
    torch.manual_seed(3)
    config = transformers.T5Config(vocab_size=100, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=3,
                                   num_heads=2, attn_implementation="eager")
    out = run(transformers.T5Model(config), input_ids=torch.arange(4, 4 + len(ENCODER_TOKENS))[None],
              decoder_input_ids=torch.arange(20, 20 + len(DECODER_TOKENS))[None])
    return out.encoder_attentions, out.decoder_attentions, out.cross_attentions


def encoder_decoder(attentions, view=views.heatmap, **kwargs):
    encoder, decoder, cross = attentions
    return view(encoder_attention=encoder, decoder_attention=decoder, cross_attention=cross,
                encoder_tokens=ENCODER_TOKENS, decoder_tokens=DECODER_TOKENS, **kwargs)


def assert_heatmap_shows(svg: str, matrix: np.ndarray) -> None:
    """Every cell of the drawing has the colour its weight gives on the linear scale up to the matrix's max."""
    assert drawn_colours(svg).shape[:2] == matrix.shape
    assert drawn_as(svg, near_colours(matrix, float(matrix.max()))).all()


# the three views draw the weights given -------------------------------------------------------------------
@pytest.mark.parametrize("model", ["gpt2", "bert"])
def test_the_heatmap_saved_as_svg_shows_each_head_of_a_self_attention_model(model, request, tmp_path):
    attentions = request.getfixturevalue(model)
    tokens = GPT2_TOKENS if model == "gpt2" else BERT_TOKENS
    panel = views.heatmap(attentions, tokens)
    for layer in range(len(attentions)):
        for head in range(attentions[0].shape[1]):
            panel.layer.value, panel.head.value = layer, head
            expected = attentions[layer][0, head].numpy()
            path = panel.save(tmp_path / f"{layer}-{head}.svg")
            svg = path.read_text()
            assert_heatmap_shows(svg, expected)
            np.testing.assert_allclose(panel.heatmap.weights(), expected, atol=5e-4)  # hover's float16
            assert texts(svg, "bvl-title")[0] == f"layer {layer} · head {head}"
    panel.close()


def test_the_cross_attention_heatmap_is_decoder_rows_by_encoder_columns(bart, tmp_path):
    panel = encoder_decoder(bart)
    assert [name for name, _ in panel.attention.options] == ["encoder", "decoder", "cross"]
    for index, (attentions, rows, cols) in enumerate([(bart[0], ENCODER_TOKENS, ENCODER_TOKENS),
                                                      (bart[1], DECODER_TOKENS, DECODER_TOKENS),
                                                      (bart[2], DECODER_TOKENS, ENCODER_TOKENS)]):
        panel.attention.value = index
        panel.layer.value, panel.head.value = 1, 1
        svg = panel.save(tmp_path / f"set{index}.svg").read_text()
        expected = attentions[1][0, 1].numpy()
        assert expected.shape == (len(rows), len(cols))
        assert_heatmap_shows(svg, expected)
        assert list(panel.heatmap.row_tokens) == [views.pretty_token(t) for t in rows]
        assert list(panel.heatmap.col_tokens) == [views.pretty_token(t) for t in cols]
    assert texts(svg, "bvl-title")[0] == "cross attention · layer 1 · head 1"
    assert "rows: decoder tokens (4, queries), columns: encoder tokens (7, keys)" in texts(svg, "bvl-note")[0]
    panel.close()


def test_the_head_view_draws_each_querys_strongest_keys_with_their_weights(bart, tmp_path):
    panel = encoder_decoder(bart, views.head_view, layer=1, heads=[0])
    panel.attention.value = 2  # cross: 4 decoder queries on the left, 7 encoder keys on the right
    svg = panel.save(tmp_path / "cross.svg").read_text()
    assert side_tokens(svg, "query") == [views.pretty_token(t) for t in DECODER_TOKENS]
    assert side_tokens(svg, "key") == [views.pretty_token(t) for t in ENCODER_TOKENS]
    weights = bart[2][1][0, 0].numpy()  # layer 1, head 0: (4, 7)
    lines = head_lines(svg)
    assert {h for h, _, _ in lines} == {0}
    strongest = weights.max()
    drawn = {(q, k): weights[q, k] / strongest for q in range(4) for k in range(7)
             if weights[q, k] / strongest >= 0.01}
    assert {(q, k) for _, q, k in lines} == set(drawn)
    for (_, q, k), opacity in lines.items():
        assert opacity == pytest.approx(drawn[q, k], abs=0.01)
    panel.close()


def test_the_head_view_shows_every_head_at_first_and_then_the_chosen_ones(gpt2):
    panel = views.head_view(gpt2, GPT2_TOKENS)
    assert panel.head_view.heads == [0, 1] and {h for h, _, _ in head_lines(panel.to_svg())} == {0, 1}
    panel.head_view.heads = [1]  # a chip clicked in the browser
    assert {h for h, _, _ in head_lines(panel.to_svg())} == {1}
    panel.close()


@pytest.mark.parametrize("index, name", [(0, "encoder"), (2, "cross")])
def test_the_model_view_thumbnails_are_the_maps_given_under_one_scale(bart, index, name, tmp_path):
    panel = encoder_decoder(bart, views.model_view)
    panel.attention.value = index
    svg = panel.save(tmp_path / "model.svg").read_text()
    codes, palette = thumbnails(svg)
    maps = np.stack([layer[0].numpy() for layer in bart[index]])  # (L, H, Q, K): fewer than 24 tokens, 1 px each
    assert codes.shape == maps.shape
    scale = maps.max() / D.TOP_CODE
    np.testing.assert_allclose(codes * scale, maps, atol=scale / 2 + 1e-7)
    assert (palette == D.PALETTE[: len(palette)]).all()
    title = texts(svg, "bvl-title")[0]
    assert title.startswith(f"{name} attention · 2 layers × 2 heads · {maps.shape[2]} × {maps.shape[3]} tokens")
    panel.close()


def test_a_thumbnail_clicked_opens_its_layer_and_head_in_the_heatmap(bert):
    panel = views.model_view(bert, BERT_TOKENS)
    panel.model_view.selected = [2, 3]  # what the front end writes on a click
    assert (panel.view.value, panel.layer.value, panel.head.value) == ("heatmap", 2, 3)
    np.testing.assert_allclose(panel.matrix(), bert[2][0, 3].numpy())
    panel.view.value = "model view"
    panel.model_view.opens += 1  # the front end, when the head opened is the one already selected
    assert (panel.view.value, panel.layer.value, panel.head.value) == ("heatmap", 2, 3)
    panel.close()


def test_the_selected_thumbnail_opened_again_opens_the_heatmap_in_the_attention_panel(pretraining_model,
                                                                                      minilm_tokenizer):
    from bertviz_lab.widgets import AttentionPanel

    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text="The cat sat.", layer=0, head=0,
                           view="model view")
    assert panel.model_view.selected == [0, 0]
    focus_before = panel.heatmap.focus_request
    panel.model_view.opens += 1  # Enter on the thumbnail already selected: `selected` does not change
    assert (panel.view.value, panel.layer.value, panel.head.value) == ("heatmap", 0, 0)
    assert panel.heatmap.focus_request == focus_before + 1  # and the keyboard follows into the cells
    panel.close()


# bertviz's other arguments ----------------------------------------------------------------------------------
def test_the_layer_choice_follows_the_attention_chosen(t5):
    panel = encoder_decoder(t5, layer=1)
    assert [value for _, value in panel.layer.options] == [0, 1]  # the encoder's 2 layers
    panel.attention.value = 1
    assert [value for _, value in panel.layer.options] == [0, 1, 2] and panel.layer.value == 1
    panel.layer.value = 2
    np.testing.assert_allclose(panel.matrix(), t5[1][2][0, 0].numpy())
    panel.attention.value = 0  # layer 2 is not the encoder's: the first layer
    assert panel.layer.value == 0
    panel.close()


def test_sentence_b_start_offers_bertvizs_five_slices(bert):
    panel = views.heatmap(bert, BERT_TOKENS, sentence_b_start=5, prettify_tokens=False)
    names = [name for name, _ in panel.attention.options]
    assert names == ["all", "sentence A → sentence A", "sentence B → sentence B", "sentence A → sentence B",
                     "sentence B → sentence A"]
    panel.attention.value = names.index("sentence A → sentence B")
    panel.layer.value, panel.head.value = 1, 2
    np.testing.assert_allclose(panel.matrix(), bert[1][0, 2, :5, 5:].numpy())
    assert list(panel.heatmap.row_tokens) == BERT_TOKENS[:5] and list(panel.heatmap.col_tokens) == BERT_TOKENS[5:]
    assert list(panel.heatmap.col_positions) == [5, 6, 7]
    panel.close()


def test_include_layers_and_include_heads_keep_the_models_numbers(bert):
    panel = views.model_view(bert, BERT_TOKENS, include_layers=[1, 2], include_heads=[1, 3])
    svg = panel.to_svg()
    assert texts(svg, "bvl-layer-label") == ["layer 1", "layer 2"]
    assert texts(svg, "bvl-head-label") == ["head 1", "head 3"]
    codes, _ = thumbnails(svg)
    maps = np.stack([bert[layer][0, [1, 3]].numpy() for layer in (1, 2)])
    scale = maps.max() / D.TOP_CODE
    np.testing.assert_allclose(codes * scale, maps, atol=scale / 2 + 1e-7)
    panel.model_view.selected = [1, 1]  # the thumbnail of layer 2, head 3
    assert (panel.layer.value, panel.head.value) == (2, 3)
    panel.close()


def test_layer_and_heads_choose_what_shows_first(gpt2):
    panel = views.heatmap(gpt2, GPT2_TOKENS, layer=1, heads=[1])
    np.testing.assert_allclose(panel.matrix(), gpt2[1][0, 1].numpy())
    panel.close()


def test_tokens_are_prettified_for_display_unless_asked_not_to(gpt2):
    assert [views.pretty_token(t) for t in ("Ġcat", "▁Katze", "##s", "low</w>", "Ġ", "[SEP]")] == \
        ["cat", "Katze", "s", "low", "␣", "[SEP]"]
    panel = views.heatmap(gpt2, GPT2_TOKENS)
    assert list(panel.heatmap.row_tokens) == ["The", "cat", "sat", "on", "the", "mat"]
    raw = views.heatmap(gpt2, GPT2_TOKENS, prettify_tokens=False)
    assert list(raw.heatmap.row_tokens) == GPT2_TOKENS
    panel.close()
    raw.close()


def test_bertvizs_stacked_tensor_and_negative_indices_are_taken_as_bertviz_takes_them(bert):
    """bertviz stacks the layers itself, so a (layers, batch, heads, queries, keys) tensor works there, and it indexes
    include_layers and slices at sentence_b_start, so negative numbers count from the end."""
    stacked = views.heatmap(torch.stack(bert), BERT_TOKENS, layer=2)
    np.testing.assert_allclose(stacked.matrix(), bert[2][0, 0].numpy())
    assert views.heatmap(torch.stack(bert).numpy(), BERT_TOKENS, layer=1).matrix() == pytest.approx(
        bert[1][0, 0].numpy())
    last_two = views.model_view(bert, BERT_TOKENS, include_layers=[-2, -1])
    assert texts(last_two.to_svg(), "bvl-layer-label") == ["layer 1", "layer 2"]
    pair = views.heatmap(bert, BERT_TOKENS, sentence_b_start=-3, prettify_tokens=False)
    pair.attention.value = 3  # sentence A → sentence B
    assert list(pair.heatmap.row_tokens) == BERT_TOKENS[:5] and list(pair.heatmap.col_tokens) == BERT_TOKENS[5:]
    for panel in (stacked, last_two, pair):
        panel.close()


def test_model_view_is_dark_by_default_and_refuses_a_bad_display_mode_in_either_action(bert):
    assert "background: #111111" in views.model_view(bert, BERT_TOKENS, html_action="return").data
    for action in ("view", "return"):
        with pytest.raises(ValueError, match="display_mode must be 'dark' or 'light', got 'blue'"):
            views.model_view(bert, BERT_TOKENS, display_mode="blue", html_action=action)


def test_numpy_arrays_are_taken_like_tensors(gpt2):
    panel = views.heatmap(tuple(layer.numpy() for layer in gpt2), GPT2_TOKENS, layer=1)
    np.testing.assert_allclose(panel.matrix(), gpt2[1][0, 0].numpy())
    panel.close()


def test_html_action_return_gives_an_offline_escaped_page_of_every_attention(bart):
    tokens = list(DECODER_TOKENS)
    tokens[1] = XSS
    encoder, decoder, cross = bart
    arguments = dict(encoder_attention=encoder, decoder_attention=decoder, cross_attention=cross,
                     encoder_tokens=ENCODER_TOKENS, decoder_tokens=tokens, html_action="return")
    html = views.head_view(**arguments).data
    assert html.startswith("<!DOCTYPE html>") and "default-src 'none'" in html
    assert html.count("<svg") == 3 * 2 and "background: #ffffff" in html  # every layer of every attention
    for name in ("encoder", "decoder", "cross"):
        assert f"{name} attention · layer 0" in html and f"{name} attention · layer 1" in html
    assert_safe_html(html.split("<body>", 1)[1])  # the decoder's (and cross attention's) token shown, escaped
    assert "http://" not in html.replace("http://www.w3.org", "")
    dark = views.model_view(**arguments, display_mode="dark").data
    assert dark.count("<svg") == 3 and "background: #111111" in dark
    assert "cross attention · 2 layers × 2 heads · 4 × 7 tokens" in dark


def test_a_panel_keeps_a_static_copy_of_the_figure_on_screen(gpt2):
    panel = views.head_view(gpt2, GPT2_TOKENS)
    first = panel.static_copy.html()
    assert panel.to_svg() in first and "layer 0" in first
    panel.layer.value = 1
    second = panel.static_copy.html()
    assert panel.to_svg() in second and second != first
    assert panel._repr_mimebundle_()["text/html"] == panel.static_html()
    panel.close()


def test_a_png_export_with_a_caption(bart, tmp_path):
    panel = encoder_decoder(bart, views.head_view)
    path = panel.save(tmp_path / "x.png", scale=2, theme="dark", caption=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = panel.save(tmp_path / "x.svg", caption=True).read_text()
    assert "encoder attention · “The cat s sat down" in "".join(ET.fromstring(svg).itertext())
    panel.close()


def test_every_token_is_escaped_in_every_view(gpt2):
    tokens = list(GPT2_TOKENS)
    tokens[2] = XSS
    for view in (views.heatmap, views.head_view, views.model_view):
        panel = view(gpt2, tokens)
        assert_safe_html(panel.static_html(), must_show=XSS if view is not views.model_view else None)
        panel.close()


# one line for bad input -------------------------------------------------------------------------------------
def _bad_inputs(gpt2, bart):
    encoder, decoder, cross = bart
    return [
        (dict(attention=gpt2[0], tokens=GPT2_TOKENS), TypeError, "expected a tuple with one (batch, heads"),
        (dict(attention=gpt2[0][0], tokens=GPT2_TOKENS), TypeError, "pass outputs.attentions of a model run with"),
        (dict(attention=(gpt2[0][0],), tokens=GPT2_TOKENS), ValueError, "attention[0] has 3 dimensions"),
        (dict(attention=(gpt2[0][0],), tokens=GPT2_TOKENS), ValueError, "pass outputs.attentions"),
        (dict(attention=gpt2, tokens=GPT2_TOKENS, sentence_b_start=-6), ValueError, "or -5..-1 from the end"),
        (dict(attention=gpt2, tokens=GPT2_TOKENS, include_layers=[-3]), ValueError, "or -2..-1 from the last"),
        (dict(attention=tuple(a.expand(2, -1, -1, -1) for a in gpt2), tokens=GPT2_TOKENS), ValueError,
         "holds a batch of 2"),
        (dict(attention=gpt2, tokens=GPT2_TOKENS[:-1]), ValueError, "6 query positions but tokens has 5 tokens"),
        (dict(attention=(gpt2[0], gpt2[1][:, :, :5, :5]), tokens=GPT2_TOKENS), ValueError,
         "every layer must have the same shape"),
        (dict(attention=(), tokens=GPT2_TOKENS), ValueError, "holds no layers"),
        (dict(attention=gpt2), ValueError, "attention= needs tokens="),
        (dict(attention=gpt2, tokens=[3, 4, 5, 6, 7, 8]), TypeError, "tokens[0] is int 3, not a string"),
        (dict(attention=gpt2, tokens=GPT2_TOKENS, encoder_attention=encoder), ValueError, "not both"),
        (dict(attention=gpt2, tokens=GPT2_TOKENS, sentence_b_start=6), ValueError, "sentence_b_start must be"),
        (dict(attention=gpt2, tokens=GPT2_TOKENS, include_layers=[2]), ValueError, "include_layers has 2"),
        (dict(attention=gpt2, tokens=GPT2_TOKENS, layer=5), ValueError, "layer 5 is not shown"),
        (dict(attention=gpt2, tokens=GPT2_TOKENS, heads=[2]), ValueError, "heads has 2"),
        (dict(attention=gpt2, tokens=GPT2_TOKENS, html_action="show"), ValueError, "html_action must be one of"),
        (dict(cross_attention=cross, encoder_tokens=ENCODER_TOKENS), ValueError,
         "cross_attention= needs decoder_tokens="),
        (dict(cross_attention=cross, encoder_tokens=DECODER_TOKENS, decoder_tokens=ENCODER_TOKENS), ValueError,
         "cross_attention has 4 query positions but decoder_tokens has 7 tokens"),
        (dict(attention=cross, tokens=DECODER_TOKENS), ValueError, "attention has 7 key positions"),
        (dict(), ValueError, "nothing to show"),
    ]


def test_bad_input_is_one_line_naming_the_problem(gpt2, bart):
    for kwargs, kind, message in _bad_inputs(gpt2, bart):
        with pytest.raises(kind) as raised:
            views.heatmap(**kwargs)
        text = str(raised.value)
        assert message in text and "\n" not in text, (kwargs.keys(), text)


def test_one_attention_set_offers_no_choice_and_several_do(gpt2, bart):
    single = views.model_view(gpt2, GPT2_TOKENS)
    several = encoder_decoder(bart, views.model_view)
    assert single.attention not in single.toolbars["model view"].children
    assert several.attention in several.toolbars["model view"].children
    single.close()
    several.close()


def test_closing_a_view_closes_every_widget_it_made(bart):
    from bertviz_lab.widgets.panels.controls import is_shared, owned_widgets

    panel = encoder_decoder(bart, views.head_view)
    panel.view.value = "model view"
    panel.view.value = "heatmap"
    made = [w for w in owned_widgets(panel) if not is_shared(w)]
    assert {type(w).__name__ for w in made} >= {"HeatmapView", "HeadView", "ModelView", "ExportBar"}
    panel.close()
    assert all(w.comm is None for w in made)


def test_no_head_is_drawn_as_switched_off_without_a_model(gpt2):
    panel = views.model_view(gpt2, GPT2_TOKENS)
    panel.model_view.ablated = [[0, 1]]  # a shift-click in the browser
    panel.layer.value = 1
    assert panel.model_view.ablated == [] and 'data-off="true"' not in panel.to_svg()
    panel.close()


def test_the_model_view_of_a_long_input_keeps_each_blocks_strongest_weight():
    """Above 24 tokens a thumbnail cell stands for a block of weights: the largest of them, so a head that puts all
    its weight on one token still reaches the top of the colour bar (a mean would show 1/n of it)."""
    T = 60
    torch.manual_seed(3)
    layers = [torch.softmax(torch.randn(1, 2, T, T), -1) for _ in range(2)]
    layers[1][0, 1] = torch.eye(T)  # a head on itself: weight 1 on the diagonal, 0 elsewhere
    panel = views.model_view(tuple(layers), [f"t{i}" for i in range(T)])
    codes, _ = thumbnails(panel.to_svg())
    expected = torch.stack([torch.nn.functional.adaptive_max_pool2d(m[0], 24) for m in layers]).numpy()
    scale = float(expected.max()) / D.TOP_CODE
    np.testing.assert_allclose(codes * scale, expected, atol=scale / 2 + 1e-7)
    assert (codes * scale).max() == pytest.approx(1.0, abs=scale)  # the diagonal's weight, not 1/3 of it
    assert "largest weight of a block" in panel.to_svg() and "largest attention weight per cell" in panel.to_svg()
    panel.close()
