"""AttentionPanel: every selector shows the right numbers from the trace; head view and model view buffers; 512 tokens
stay compact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertviz_lab.model import BERT
from bertviz_lab.trace import attention_rollout, trace
from bertviz_lab.widgets import AttentionPanel
from bertviz_lab.widgets.attention_panel import FLOAT_LIMIT, trace_text
from bertviz_lab.widgets.attention_views import HeadView, ModelView
from bertviz_lab.widgets.payload import sent_messages, state_bytes
from widgets_testlib import plotly_shows, tiny_config

TEXT_A = "The cat sat on the mat."
TEXT_B = 'It was "warm" there.'
Z_ATOL = 6e-6  # the heatmap sends weights rounded to 5 decimals


@pytest.fixture
def pair_panel(pretraining_model, tokenizer) -> AttentionPanel:
    return AttentionPanel(model=pretraining_model, tokenizer=tokenizer, text=TEXT_A, text_b=TEXT_B)


@pytest.fixture
def single_panel(pretraining_model, tokenizer) -> AttentionPanel:
    return AttentionPanel(model=pretraining_model, tokenizer=tokenizer, text=TEXT_A)


def shown(panel: AttentionPanel) -> tuple[np.ndarray, list[str], list[str]]:
    """What the heatmap holds: z, x labels (keys), y labels (queries)."""
    data = panel.heatmap.data[0]
    return np.asarray(data.z, dtype=float), list(data.x), list(data.y)


def positions_of(labels: list[str]) -> list[int]:
    return [int(label.split("·", 1)[0]) for label in labels]


def segments(panel: AttentionPanel) -> tuple[list[int], list[int]]:
    types = panel.trace.token_type_ids[0].tolist()
    return [i for i, t in enumerate(types) if t == 0], [i for i, t in enumerate(types) if t == 1]


# heatmap values -----------------------------------------------------------------------------------------
def test_layer_and_head_selectors_show_that_head_of_the_trace(pair_panel):
    panel = pair_panel
    tokens = panel.trace.tokens[0]
    assert panel.layer.options == (0, 1, 2) and panel.head.options == (0, 1, 2, 3)
    for layer in (0, 2, 1):
        for head in (3, 0, 2):
            panel.layer.value, panel.head.value = layer, head
            z, x, y = shown(panel)
            expected = panel.trace.attention(layer)[0, head].numpy()
            assert z.shape == expected.shape == (len(tokens), len(tokens))
            np.testing.assert_allclose(z, expected, atol=Z_ATOL)
            assert positions_of(x) == positions_of(y) == list(range(len(tokens)))
            assert panel.heatmap.layout.title.text == f"layer {layer} · head {head}"
    # the trace really is the model's attention on this text: rerun it independently
    with torch.inference_mode(), trace(pair_panel.model) as again:
        encoded = panel.tokenizer.encode_pretraining_inputs(TEXT_A, TEXT_B)
        panel.model(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    np.testing.assert_allclose(shown(panel)[0], again.attention(1)[0, 2].numpy(), atol=Z_ATOL)


def test_mean_and_rollout_aggregations(pair_panel):
    panel = pair_panel
    panel.aggregation.value = "mean"
    assert panel.head.disabled
    for layer in range(3):
        panel.layer.value = layer
        np.testing.assert_allclose(shown(panel)[0], panel.trace.attention(layer)[0].mean(dim=0).numpy(), atol=Z_ATOL)
        assert "mean of heads" in panel.heatmap.layout.title.text
    panel.aggregation.value = "rollout"
    for layer in range(3):
        panel.layer.value = layer
        expected = attention_rollout(panel.trace.attentions[: layer + 1], panel.trace.attention_mask)[0].numpy()
        z = shown(panel)[0]
        np.testing.assert_allclose(z, expected, atol=Z_ATOL)
        np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-4)
        assert f"rollout through layers 0..{layer}" in panel.heatmap.layout.title.text
    assert not np.allclose(shown(panel)[0], panel.trace.attention(2)[0].mean(dim=0).numpy(), atol=1e-3)
    panel.aggregation.value = "head"
    assert not panel.head.disabled
    np.testing.assert_allclose(shown(panel)[0], panel.trace.attention(2)[0, panel.head.value].numpy(), atol=Z_ATOL)


def test_hide_special_tokens_removes_their_rows_and_columns(pair_panel):
    panel = pair_panel
    panel.layer.value, panel.head.value = 1, 3
    tokens = panel.trace.tokens[0]
    keep = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    assert len(keep) == len(tokens) - 3
    panel.hide_special.value = True
    z, x, y = shown(panel)
    assert positions_of(x) == positions_of(y) == keep
    assert not [label for label in x + y if "[CLS]" in label or "[SEP]" in label]
    np.testing.assert_allclose(z, panel.trace.attention(1)[0, 3].numpy()[np.ix_(keep, keep)], atol=Z_ATOL)
    panel.hide_special.value = False
    assert shown(panel)[0].shape == (len(tokens), len(tokens))


@pytest.mark.parametrize("hide_special", [False, True])
def test_sentence_pair_directions_show_only_that_block(pair_panel, hide_special):
    panel = pair_panel
    assert not panel.direction.disabled
    panel.layer.value, panel.head.value, panel.hide_special.value = 2, 1, hide_special
    a, b = segments(panel)
    tokens = panel.trace.tokens[0]
    if hide_special:
        a = [i for i in a if tokens[i] not in ("[CLS]", "[SEP]")]
        b = [i for i in b if tokens[i] not in ("[CLS]", "[SEP]")]
    full = panel.trace.attention(2)[0, 1].numpy()
    for direction, queries, keys in (("A→B", a, b), ("B→A", b, a)):
        panel.direction.value = direction
        z, x, y = shown(panel)
        assert positions_of(y) == queries and positions_of(x) == keys
        np.testing.assert_allclose(z, full[np.ix_(queries, keys)], atol=Z_ATOL)
    assert [tokens[i] for i in a][:3] == (["the", "cat", "sat"] if hide_special else ["[CLS]", "the", "cat"])
    panel.direction.value = "all"
    assert positions_of(shown(panel)[2]) == sorted(a + b)


def test_directions_need_a_sentence_pair(single_panel, pair_panel):
    assert single_panel.direction.disabled and single_panel.direction.value == "all"
    single_panel.direction.value = "A→B"  # only possible from code: the control is disabled
    assert single_panel.direction.value == "all" and "sentence pair" in single_panel.message.value
    # a panel that shows a pair goes back to "all" (and disables the choice) when it gets a single sentence
    pair_panel.direction.value = "B→A"
    pair_panel.set_text("Only one sentence here.")
    assert pair_panel.direction.value == "all" and pair_panel.direction.disabled
    assert shown(pair_panel)[0].shape == (7, 7)


def test_padded_batch_row_leaves_padding_out(tokenizer, backbone):
    encoded = tokenizer(["short one", "a much longer text is here"], padding=True, return_tensors="pt")
    with torch.inference_mode(), trace(backbone, tokens=encoded, tokenizer=tokenizer) as recorded:
        backbone(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    panel = AttentionPanel(recorded, row=0, layer=2, head=1)
    real = int(encoded["attention_mask"][0].sum())
    z, x, y = shown(panel)
    assert real < encoded["input_ids"].shape[1] and z.shape == (real, real)
    assert not [label for label in x if "[PAD]" in label]
    np.testing.assert_allclose(z, recorded.attention(2)[0, 1, :real, :real].numpy(), atol=Z_ATOL)
    buffer = panel.model_view.thumbnails
    assert len(buffer) == 3 * 4 * real * real  # thumbnails of the real tokens only (here not even pooled)


# head view ----------------------------------------------------------------------------------------------
def decoded_head_view(view: HeadView) -> tuple[np.ndarray, np.ndarray]:
    shape = (len(view.heads), len(view.query_tokens), view.k)
    return (np.frombuffer(view.indices, dtype=np.uint16).reshape(shape),
            np.frombuffer(view.weights, dtype=np.uint8).reshape(shape))


def check_head_view(panel: AttentionPanel, layer: int, queries: list[int], keys: list[int]) -> None:
    view = panel.head_view
    tokens = panel.trace.tokens[0]
    assert view.query_tokens == [tokens[i] for i in queries] and view.key_tokens == [tokens[i] for i in keys]
    assert view.k == min(panel.head_view_k, len(keys))
    indices, weights = decoded_head_view(view)
    for slot, head in enumerate(view.heads):
        matrix = panel.trace.attention(layer)[0, head].numpy()[np.ix_(queries, keys)]
        for q in range(len(queries)):
            expected = np.argsort(-matrix[q], kind="stable")[: view.k]
            assert set(indices[slot, q].tolist()) == set(expected.tolist())
            np.testing.assert_array_equal(weights[slot, q], np.rint(matrix[q, indices[slot, q]] * 255))


def test_head_view_buffers_are_the_top_k_lines_of_the_shown_heads(pair_panel):
    panel = pair_panel
    panel.layer.value = 1
    panel.view.value = "head view"
    assert isinstance(panel.on_screen, HeadView) and panel.slots["heatmap"].layout.display == "none"
    T = len(panel.trace.tokens[0])
    assert panel.head_view.heads == [0, 1, 2, 3] and len(panel.head_view.colors) == 4
    assert len(panel.head_view.indices) == 4 * T * 8 * 2 and len(panel.head_view.weights) == 4 * T * 8
    check_head_view(panel, 1, list(range(T)), list(range(T)))
    panel.heads_shown.value = (3, 1)
    assert panel.head_view.heads == [1, 3]
    check_head_view(panel, 1, list(range(T)), list(range(T)))
    panel.layer.value = 2
    check_head_view(panel, 2, list(range(T)), list(range(T)))
    panel.direction.value = "A→B"
    a, b = segments(panel)
    check_head_view(panel, 2, a, b)
    assert int(decoded_head_view(panel.head_view)[0].max()) < len(b)  # indices count within the key column


# model view ---------------------------------------------------------------------------------------------
def test_model_view_thumbnails_and_click_opens_the_heatmap(pair_panel):
    panel = pair_panel
    panel.layer.value, panel.head.value = 1, 2
    panel.view.value = "model view"
    view = panel.model_view
    # the view stays the model view (marking the current head is not a click)
    assert panel.view.value == "model view" and isinstance(panel.on_screen, ModelView)
    assert view.selected == [1, 2]
    T = len(panel.trace.tokens[0])
    assert (view.num_layers, view.num_heads, view.size) == (3, 4, T)  # T < 24: one pixel per weight
    assert len(view.thumbnails) == 3 * 4 * T * T
    thumbs = np.frombuffer(view.thumbnails, dtype=np.uint8).reshape(3, 4, T, T)
    for layer in range(3):
        for head in range(4):
            weights = panel.trace.attention(layer)[0, head].numpy()
            expected = np.rint(weights / weights.max() * 255)
            assert np.abs(thumbs[layer, head].astype(int) - expected).max() <= 1
    view.selected = [2, 3]  # what a click in the browser does
    assert panel.view.value == "heatmap" and panel.on_screen is panel.heatmap and panel.slots["heatmap"].layout.display is None
    assert (panel.layer.value, panel.head.value, panel.aggregation.value) == (2, 3, "head")
    np.testing.assert_allclose(shown(panel)[0], panel.trace.attention(2)[0, 3].numpy(), atol=Z_ATOL)
    # clicking while the heatmap is on screen, also from the mean of heads, shows the clicked head
    panel.aggregation.value = "mean"
    view.selected = [0, 1]
    assert (panel.layer.value, panel.head.value, panel.aggregation.value) == (0, 1, "head")
    np.testing.assert_allclose(shown(panel)[0], panel.trace.attention(0)[0, 1].numpy(), atol=Z_ATOL)


def test_new_text_updates_every_view(pair_panel):
    panel = pair_panel
    panel.view.value = "head view"
    panel.set_text("Dogs bark loudly.", "Birds sing.")
    tokens = panel.trace.tokens[0]
    assert tokens[:4] == ["[CLS]", "dogs", "bark", "loudly"]
    assert panel.head_view.query_tokens == tokens
    assert len(panel.model_view.thumbnails) == 3 * 4 * len(tokens) ** 2
    panel.view.value = "heatmap"
    np.testing.assert_allclose(shown(panel)[0], panel.trace.attention(0)[0, 0].numpy(), atol=Z_ATOL)


def test_bad_arguments_raise_clear_errors(pretraining_model, tokenizer, pair_panel):
    with pytest.raises(TypeError, match="Trace"):
        AttentionPanel()
    with pytest.raises(ValueError, match="layer 7 does not exist"):
        AttentionPanel(pair_panel.trace, layer=7)
    with pytest.raises(ValueError, match="head 4 does not exist"):
        AttentionPanel(pair_panel.trace, head=4)
    with pytest.raises(ValueError, match="empty"):
        AttentionPanel(model=pretraining_model, tokenizer=tokenizer, text="  ")
    with pytest.raises(ValueError, match="fixed trace"):
        AttentionPanel(pair_panel.trace).set_text("no model to run")


def test_axis_labels_show_the_tokens_as_plotly_draws_them(pair_panel):
    tokens = pair_panel.trace.tokens[0]
    assert '"' in tokens
    z, x, y = shown(pair_panel)
    assert [plotly_shows(label) for label in x] == [f"{i}·{t}" for i, t in enumerate(tokens)]
    assert "query %{y}" in pair_panel.heatmap.data[0].hovertemplate and "%{x}" in pair_panel.heatmap.data[0].hovertemplate


def test_static_fallback_in_the_mimebundle(pair_panel):
    bundle = pair_panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"] == pair_panel.static_html()
    assert bundle["text/html"].startswith("<div class='bvl-attention'><svg") and "<script" not in bundle["text/html"]


# 512 tokens ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def long_panel(tokenizer) -> AttentionPanel:
    """12 layers x 12 heads (like bert-base) at 512 tokens, narrow so it runs in a fraction of a second."""
    torch.manual_seed(4)
    model = BERT(tiny_config(tokenizer.vocab_size, num_hidden_layers=12, num_attention_heads=12, hidden_size=48,
                             intermediate_size=96, max_position_embeddings=512)).eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        recorded = trace_text(model, tokenizer, " ".join(["word"] * 510))
    finally:
        torch.set_num_threads(threads)
    return AttentionPanel(recorded)


def test_512_tokens_stay_compact(long_panel):
    panel = long_panel
    L, H, T = 12, 12, 512
    assert panel.trace.attentions[0].shape == (1, H, T, T)
    full_size = L * H * T * T * 4  # every map as float32: 151 MB (bertviz's JSON of the same: ~860 MB)

    # heatmap: one head, 8-bit beyond FLOAT_LIMIT tokens; an update sends one matrix of about 4 JSON bytes per cell
    data = panel.heatmap.data[0]
    assert T > FLOAT_LIMIT and np.asarray(data.z).dtype == np.uint8 and np.asarray(data.z).shape == (T, T)
    assert data.zmax == 255 and "/255" in data.hovertemplate
    with sent_messages(panel.heatmap) as sizes:
        panel.layer.value = 7
    assert 0 < sum(sizes) <= 1.5e6  # float32 z would be ~5.3 MB; 8-bit as JSON is ~1.2 MB
    expected = panel.trace.attention(7)[0, 0].numpy()
    decoded = np.asarray(panel.heatmap.data[0].z, dtype=float) / 255 * expected.max()
    assert np.abs(decoded - expected).max() <= expected.max() / 255

    # model view: L*H thumbnails of 24x24 bytes (83 KB) plus a few hundred bytes of JSON; goal <= 2 MB
    panel.view.value = "model view"
    view = panel.model_view
    assert view.size == 24 and len(view.thumbnails) == L * H * 24 * 24
    model_view_bytes = state_bytes(view)
    assert model_view_bytes <= L * H * 24 * 24 + 4096
    assert model_view_bytes <= 2_000_000 and model_view_bytes * 1000 < full_size

    # head view: k=8 lines per query for the 12 shown heads, 3 bytes each (uint16 key + uint8 weight), plus the
    # two token columns as JSON (~10 bytes a token here): 147 KB + 10 KB
    panel.view.value = "head view"
    head_view_bytes = state_bytes(panel.head_view)
    k = panel.head_view.k
    assert k == 8 and len(panel.head_view.indices) == 2 * H * T * k
    assert head_view_bytes <= 3 * H * T * k + 2 * T * 12 + 4096
