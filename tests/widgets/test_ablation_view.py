"""Head ablation in the model view: a head clicked off runs the text again under trace.ablate, the attention and the
predictions before → after equal what ablate() gives directly, the drawing (the one the browser shows, the static copy
and exports hold) marks the heads off and its thumbnails and badges show the change, reset brings every head back, and
the model keeps no hook."""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from attention_figures import assert_themed_drawing, groups, texts, thumbnails
from widgets_testlib import XSS, assert_safe_html, tiny_config

from bertviz_lab.model import BERT
from bertviz_lab.model.hook_points import hook_points
from bertviz_lab.trace import ablate, trace
from bertviz_lab.widgets import AttentionPanel, Workbench
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.model_view import badge_text
from bertviz_lab.widgets.views.model_view import ModelView

TEXT_A = "The cat sat on the [MASK]."
TEXT_B = 'It was "warm" there.'
OFF = [[0, 1], [1, 2]]  # what the browser sends after two clicks in "switch it off" mode


@pytest.fixture
def panel(pretraining_model, minilm_tokenizer) -> AttentionPanel:
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT_A, text_b=TEXT_B)
    panel.view.value = "model view"
    return panel


def no_hooks(model: torch.nn.Module) -> bool:
    """Neither a hook point nor any module holds a hook."""
    return not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()) and \
        not any(p._forward_hooks for p in hook_points(model).values())


def direct(model, tokenizer, heads, mode):
    """The pair run with and without the heads off, by ablate() itself: (attentions, MLM logits, NSP logits) each."""
    encoded = tokenizer.encode_pretraining_inputs(TEXT_A, TEXT_B)
    inputs = {k: encoded[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    runs = []
    for off in (set(), set(heads)):
        with torch.inference_mode(), ablate(model, off, mode), trace(model) as recorded:
            mlm, nsp = model(**inputs)
        runs.append((recorded.attentions, mlm, nsp))
    return encoded, runs


def drawn(view: ModelView) -> np.ndarray:
    """The thumbnails as the drawing shows them, turned back into weights (or changes) with the kernel's scale."""
    codes, palette = thumbnails(view.to_svg())
    assert (palette == np.frombuffer(view.palette, np.uint8).reshape(256, 3)).all()
    return (np.minimum(codes.astype(np.float64), D.TOP_CODE) - view.zero_code) * view.scale


def top3(tokenizer, logits, position):
    probs = torch.softmax(logits[0, position].float(), -1)
    best = probs.topk(3)
    return [(tokenizer.convert_ids_to_tokens([int(i)])[0], float(p)) for p, i in zip(best.values, best.indices)]


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_heads_clicked_off_rerun_under_ablate_and_match_it(panel, mode):
    model, tokenizer = panel.model, panel.tokenizer
    bar, view = panel.ablation_bar, panel.model_view
    assert bar.ablation is None and view.changes == b"" and view.lines == []
    assert ET.fromstring(view.svg).get("data-ablated") == "" and not groups(view.svg, "bvl-ablated")
    bar.click.value = "ablate"
    assert view.click_mode == "ablate"  # the front end now toggles heads instead of opening them
    bar.mode.value = mode
    view.ablated = OFF
    ablation = bar.ablation
    assert ablation.heads == ((0, 1), (1, 2)) and ablation.mode == mode
    encoded, ((before, mlm_0, nsp_0), (after, mlm_1, nsp_1)) = direct(model, tokenizer, [(0, 1), (1, 2)], mode)
    for layer in range(3):
        np.testing.assert_allclose(ablation.after.attentions[layer].numpy(), after[layer].numpy(), atol=1e-6)
        np.testing.assert_allclose(ablation.before.attentions[layer].numpy(), before[layer].numpy(), atol=1e-6)
    assert not torch.allclose(after[2], before[2], atol=1e-6)  # something did change
    # the predictions at the [MASK], before -> after, as ablate() gives them directly
    position = encoded["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    (change,) = ablation.masked_changes()
    assert change.position == position
    for (token, p), (token_ref, p_ref) in zip(change.before + change.after,
                                              top3(tokenizer, mlm_0, position) + top3(tokenizer, mlm_1, position)):
        assert token == token_ref and p == pytest.approx(p_ref, abs=1e-6)
    is_next = ablation.is_next()
    assert is_next == pytest.approx((float(torch.softmax(nsp_0[0], -1)[0]), float(torch.softmax(nsp_1[0], -1)[0])),
                                    abs=1e-6)
    # the view says it: one line per [MASK], one for P(IsNext), escaped in the summary
    assert view.lines == ablation.lines() and len(view.lines) == 2
    assert view.lines[0].startswith(f"[MASK] at {position}: {change.before[0][0]} ") and " → " in view.lines[0]
    assert view.lines[1].startswith("P(IsNext): ")
    summary = bar.summary.value
    assert f"2 heads off ({mode})" in summary and "L0 H1, L1 H2" in summary
    assert html.escape(view.lines[0], quote=False) not in summary  # said once, in the view (and its SVG)
    assert texts(view.svg, "bvl-ablation-line") == view.lines
    assert no_hooks(model)


def test_thumbnails_show_the_change_and_badges_say_how_much(panel):
    view, bar = panel.model_view, panel.ablation_bar
    view.ablated = OFF
    ablation = bar.ablation
    T = len(panel.trace.tokens[0])
    before = np.stack([a[0].numpy() for a in ablation.before.attentions])  # (L, H, T, T)
    after = np.stack([a[0].numpy() for a in ablation.after.attentions])
    # "change" (the default): after − before on a diverging scale centred at code 127, in the drawing's pixels
    assert bar.show.value == "change" and view.zero_code == D.ZERO_CODE
    assert view.palette == D.DIVERGING.tobytes() and view.size == T
    np.testing.assert_allclose(drawn(view), after - before, atol=view.scale / 2 + 1e-7)
    assert "change with 2 head(s) off (zero)" in view.title and view.bar_title.startswith("change in attention")
    assert texts(view.svg, "bvl-title") == [view.title] and texts(view.svg, "bvl-colorbar-title") == [view.bar_title]
    # badges: half the L1 distance per query row, averaged; layer 0's maps come before any head is off
    changes = view.head_changes()
    expected = 0.5 * np.abs(after - before).sum(-1).mean(-1)
    np.testing.assert_allclose(changes, expected, atol=1e-6)
    assert (changes[0] == 0).all() and (changes[1:] > 0).all()
    for thumb in groups(view.svg, "bvl-thumb"):  # what hover reads, without the kernel
        layer, head = int(thumb.get("data-layer")), int(thumb.get("data-head"))
        assert float(thumb.get("data-change")) == pytest.approx(changes[layer, head], abs=5e-5)
        assert (thumb.get("data-off") == "true") == ([layer, head] in OFF)
    # "attention after": the maps with the heads off under one sequential scale
    bar.show.value = "after"
    assert view.zero_code == 0 and view.palette == D.PALETTE.tobytes()
    special = np.array([t in ("[CLS]", "[SEP]") for t in panel.trace.tokens[0]])
    assert view.scale == pytest.approx(after[..., ~special, :][..., ~special].max() / D.TOP_CODE, rel=1e-6)
    np.testing.assert_allclose(drawn(view), np.minimum(after, view.scale * D.TOP_CODE), atol=view.scale / 2 + 1e-7)
    assert "attention with 2 head(s) off (zero)" in view.title
    # the drawing (live view, static copy, export) marks the heads off, the badges and the prediction lines
    bar.show.value = "change"
    view.badge_min = 1e-5  # a random tiny model's heads barely move: badge every head that moved at all
    svg = panel.to_svg()
    assert svg == view.svg and svg in panel.static_html()
    root = ET.fromstring(svg)
    assert root.get("data-ablated") == "0:1,1:2"
    marked = [(int(g.get("data-layer")), int(g.get("data-head"))) for g in groups(svg, "bvl-thumb")
              if [child for child in g if "bvl-ablated" in (child.get("class") or "")]]
    assert marked == [(0, 1), (1, 2)] and texts(svg, "bvl-ink-white").count("off") == 2
    badged = [(layer, head) for layer in range(3) for head in range(4)
              if changes[layer, head] >= view.badge_min and [layer, head] not in OFF]
    assert len(groups(svg, "bvl-badge")) == len(badged) == int(root.get("data-badges")) == 2 * 4 - 1
    assert sorted(t for t in texts(svg, "bvl-ink-black")) == sorted(badge_text(changes[b]) for b in badged)
    assert texts(svg, "bvl-ablation-line") == view.lines
    assert assert_themed_drawing(svg, "model-view") == 2 + len(badged)  # "off" and the badges: their own ink
    assert panel.export_bar.name == "attention-model-view-2-heads-off"


def test_reset_restores_every_head_and_leaves_no_hook(panel):
    view, bar = panel.model_view, panel.ablation_bar
    maps = np.stack([panel.trace.attention(layer)[0].numpy() for layer in range(3)])
    original = (view.thumbnails, view.title, view.scale)
    view.ablated = OFF
    assert bar.ablation is not None and view.thumbnails != original[0]
    bar.reset.click()
    assert view.ablated == [] and bar.ablation is None
    assert (view.thumbnails, view.title, view.scale) == original and view.changes == b"" and view.lines == []
    np.testing.assert_allclose(drawn(view), np.minimum(maps, view.scale * D.TOP_CODE), atol=view.scale / 2 + 1e-7)
    assert ET.fromstring(view.svg).get("data-ablated") == "" and not groups(view.svg, "bvl-ablated")
    assert not groups(view.svg, "bvl-badge") and not texts(view.svg, "bvl-ablation-line")
    assert "all heads on" in bar.summary.value
    assert no_hooks(panel.model)
    # a click in "open it" mode still opens the head as the heatmap
    assert bar.click.value == "open" and view.click_mode == "open"
    view.selected = [2, 1]
    assert panel.view.value == "heatmap" and (panel.layer.value, panel.head.value) == (2, 1)


def test_heads_stay_off_for_a_new_text_and_the_mode_reruns(panel):
    view, bar = panel.model_view, panel.ablation_bar
    view.ablated = [[2, 0]]
    panel.set_text("Dogs [MASK] loudly.")
    ablation = bar.ablation
    assert ablation.heads == ((2, 0),) and ablation.before is panel.trace
    assert ablation.after.tokens is None and ablation.after.attentions[0].shape[-1] == len(panel.trace.tokens[0])
    assert (view.head_changes()[:3] == 0).all()  # layer 2 is the last: no later layer's attention can move
    bar.mode.value = "mean"
    assert bar.ablation is not ablation and bar.ablation.mode == "mean"
    assert no_hooks(panel.model)


def test_a_panel_without_its_model_cannot_switch_heads_off(pretraining_model, minilm_tokenizer):
    with torch.inference_mode(), trace(pretraining_model) as recorded:
        pretraining_model(torch.tensor([[101, 2000, 2001, 102]]))
    panel = AttentionPanel(recorded, view="model view")
    panel.model_view.ablated = [[0, 0]]
    assert panel.model_view.ablated == [] and panel.ablation_bar.ablation is None
    assert "needs the model" in panel.ablation_bar.summary.value and "style=" not in panel.ablation_bar.summary.value
    # with the model but no text (a trace of one's own), the trace's inputs run again
    with_model = AttentionPanel(recorded, model=pretraining_model, tokenizer=minilm_tokenizer, view="model view")
    with_model.model_view.ablated = [[1, 3]]
    with torch.inference_mode(), ablate(pretraining_model, {(1, 3)}), trace(pretraining_model) as expected:
        pretraining_model(torch.tensor([[101, 2000, 2001, 102]]))
    np.testing.assert_allclose(with_model.ablation_bar.ablation.after.attentions[2].numpy(),
                               expected.attentions[2].numpy(), atol=1e-6)
    assert with_model.ablation_bar.ablation.masked_changes() == []  # no [MASK]
    assert no_hooks(pretraining_model)


def test_a_model_without_heads_shows_the_attention_change_only(backbone, minilm_tokenizer):
    panel = AttentionPanel(model=backbone, tokenizer=minilm_tokenizer, text="A [MASK] here.", view="model view")
    panel.model_view.ablated = [[0, 0], [0, 1], [0, 2], [0, 3]]
    assert panel.ablation_bar.ablation.lines() == [] and panel.model_view.lines == []
    assert "only the attention maps show the change" in panel.ablation_bar.summary.value
    assert panel.model_view.head_changes()[1:].min() > 0


def test_the_workbench_keeps_heads_off_across_texts(pretraining_model, minilm_tokenizer):
    bench = Workbench(pretraining_model, minilm_tokenizer, text="A [MASK] cat.")
    panel = bench.attention
    panel.view.value = "model view"
    panel.model_view.ablated = [[0, 2]]
    bench.text_box.value = "Another [MASK] dog."
    bench.run()
    assert panel.ablation_bar.ablation.before is panel.trace and panel.trace.tokens[0][1] == "another"
    assert panel.model_view.lines and panel.model_view.lines[0].startswith("[MASK] at 2:")
    assert no_hooks(pretraining_model)


def test_model_view_pools_differences_of_long_inputs(minilm_tokenizer):
    torch.manual_seed(7)
    model = BERT(tiny_config(minilm_tokenizer.vocab_size, num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                             intermediate_size=64, max_position_embeddings=128)).eval()
    panel = AttentionPanel(model=model, tokenizer=minilm_tokenizer, text=" ".join(["word"] * 100), view="model view")
    panel.model_view.ablated = [[0, 1]]
    view = panel.model_view
    assert isinstance(view, ModelView) and view.size == 24
    ablation = panel.ablation_bar.ablation
    diff = torch.stack([(b[0] - a[0]) for a, b in zip(ablation.before.attentions, ablation.after.attentions)])
    pooled = F.adaptive_avg_pool2d(diff.flatten(0, 1).unsqueeze(1), 24).squeeze(1).view(2, 2, 24, 24).numpy()
    np.testing.assert_allclose(drawn(view), pooled, atol=view.scale / 2 + 1e-7)
    assert "each cell the mean change over" in view.hint and texts(view.svg, "bvl-note") == [view.hint]


def test_predicted_tokens_are_escaped_in_the_figure(xss_model, xss_tokenizer):
    panel = AttentionPanel(model=xss_model, tokenizer=xss_tokenizer, text=f"the [MASK] {XSS} cat", view="model view")
    panel.model_view.ablated = [[0, 1]]
    assert panel.model_view.lines[0].startswith(f"[MASK] at 2: {XSS} ")  # sent whole: the browser sets textContent
    svg = panel.to_svg()
    assert texts(svg, "bvl-ablation-line")[0] == panel.model_view.lines[0]  # the XML decodes to the token itself
    assert_safe_html(svg)
    assert_safe_html(panel.static_html())
    assert_safe_html(panel.ablation_bar.summary.value, must_show=None)
    panel.view.value = "neuron view"
    assert XSS in panel.neuron_view.key_tokens
    assert_safe_html(panel.to_svg(), must_show=None)  # the neuron view cuts the key's label short
