"""A token such as `<img src=x onerror=alert(1)>` is shown as text everywhere: escaped in every HTML and SVG a panel
produces (static copies, exported SVGs, HTML widgets), set as textContent in the anywidget views."""

from __future__ import annotations

import pytest
import torch
from widgets_testlib import XSS, assert_safe_html, html_values

from bertviz_lab.trace import trace
from bertviz_lab.widgets import AttentionPanel, MaskingPreview, Workbench
from bertviz_lab.widgets.views.front_end import esm

TEXT = f"the cat {XSS} sat on the mat ."
TEXT_B = f'it was " warm " & {XSS}'


def assert_heatmap_safe(panel: AttentionPanel) -> None:
    """The heatmap view gets the tokens themselves (set with textContent in the browser) and its SVG escapes them."""
    view = panel.heatmap
    tokens = panel.trace.tokens[0]
    assert view.row_tokens == [tokens[p] for p in view.row_positions]
    assert view.col_tokens == [tokens[p] for p in view.col_positions]
    assert_safe_html(view.to_svg(), must_show=XSS if XSS in view.row_tokens + view.col_tokens else None)


def assert_attention_panel_safe(panel: AttentionPanel) -> None:
    for view in ("heatmap", "head view", "model view"):
        panel.view.value = view
        for markup in html_values(panel) + [panel.static_html(), panel._repr_mimebundle_()["text/html"]]:
            assert_safe_html(markup, must_show=None)
    panel.view.value = "heatmap"
    assert_safe_html(panel.static_html())
    assert_heatmap_safe(panel)
    # the head view gets the token itself and sets it with textContent: the browser shows it, never parses it
    panel.view.value = "head view"
    assert XSS in panel.head_view.query_tokens
    assert_safe_html(panel.static_html())
    for name in ("heatmap.js", "head_view.js", "model_view.js"):
        code = esm(name)
        assert "innerHTML" not in code and "insertAdjacentHTML" not in code and "textContent" in code
    panel.view.value = "heatmap"


def test_attention_panel_from_a_tokenizer(xss_model, xss_tokenizer):
    panel = AttentionPanel(model=xss_model, tokenizer=xss_tokenizer, text=TEXT, text_b=TEXT_B)
    assert panel.trace.tokens[0].count(XSS) == 2 and '"' in panel.trace.tokens[0] and "&" in panel.trace.tokens[0]
    assert_attention_panel_safe(panel)
    for direction in ("A→B", "B→A"):
        panel.direction.value = direction
        panel.view.value = "heatmap"
        assert_heatmap_safe(panel)
        assert_safe_html(panel.static_html())


def test_attention_panel_from_a_trace_with_attached_tokens(pretraining_model):
    ids = torch.tensor([[101, 2000, 2001, 2002, 102]])
    with torch.inference_mode(), trace(pretraining_model) as recorded:
        pretraining_model(ids)
    recorded.attach_tokens(["[CLS]", "a", XSS, '"quoted"', "[SEP]"])
    panel = AttentionPanel(recorded)
    assert_attention_panel_safe(panel)
    assert panel.heatmap.col_tokens == ["[CLS]", "a", XSS, '"quoted"', "[SEP]"]
    panel.hide_special.value = True
    assert_heatmap_safe(panel)


@pytest.mark.parametrize("p,mask,random", [(1.0, 0.0, 0.0), (1.0, 1.0, 0.0), (1.0, 0.0, 1.0), (0.5, 0.8, 0.1)])
def test_masking_preview(xss_model, xss_tokenizer, p, mask, random):
    preview = MaskingPreview(xss_tokenizer, TEXT, model=xss_model, text_b=TEXT_B, mlm_probability=p,
                             mask_replace_prob=mask, random_replace_prob=random, seed=4)
    assert preview.predictions() and all(top[0][0] == XSS for _, top in preview.predictions())
    shown = [markup for markup in html_values(preview) if markup]  # the toolbar's empty status lines aside
    for markup in shown + [preview.static_html(), preview._repr_mimebundle_()["text/html"]]:
        assert_safe_html(markup)  # at least in the predictions table; also in the chips and labels when kept


def test_masking_preview_tooltips_and_random_replacements(xss_tokenizer):
    preview = MaskingPreview(xss_tokenizer, "the cat sat on the mat", mlm_probability=1.0, mask_replace_prob=0.0,
                             random_replace_prob=1.0, seed=0)
    replaced = xss_tokenizer.convert_ids_to_tokens(preview.masked_ids[0].tolist())
    assert XSS in replaced  # some random replacement drew the token: shown as "original → replacement"
    assert_safe_html(preview.static_html())


def test_workbench_and_every_html_widget(xss_model, xss_tokenizer):
    bench = Workbench(xss_model, xss_tokenizer, text=TEXT, text_b=TEXT_B)
    for markup in html_values(bench) + [bench.static_html(), bench._repr_mimebundle_()["text/html"]]:
        assert_safe_html(markup, must_show=None)
    assert_safe_html(bench.static_html())
    assert_heatmap_safe(bench.attention)
    # a text that fails shows an escaped error, too
    bench.text_box.value = ""
    bench.run()
    assert bench.error.value and "<img" not in bench.error.value


def test_tokens_with_characters_xml_forbids_still_save_well_formed_svgs(pretraining_model, tmp_path):
    """NUL and other control characters in a token are drawn as their Control Pictures signs: every view's saved
    SVG parses as XML, and the token is still told apart from its neighbours."""
    import xml.etree.ElementTree as ET

    ids = torch.tensor([[101, 2000, 2001, 2002, 102]])
    with torch.inference_mode(), trace(pretraining_model) as recorded:
        pretraining_model(ids)
    recorded.attach_tokens(["[CLS]", "nul\x00here", "bell\x07", "sur\ud800", "[SEP]"])
    panel = AttentionPanel(recorded)
    for view in ("heatmap", "head view", "model view"):
        panel.view.value = view
        saved = panel.save(tmp_path / f"{view}.svg")
        text = saved.read_text(encoding="utf-8", errors="strict")
        ET.fromstring(text)
        if view == "heatmap":
            assert "nul\u2400here" in text and "bell\u2407" in text and "sur\ufffd" in text


@pytest.mark.parametrize("value", [b"bytes", 5, ("a", "b"), ["a"], torch.tensor([1, 2]), 3.5])
def test_a_text_that_is_not_a_str_is_one_line_naming_the_argument(xss_model, xss_tokenizer, value):
    """Before any widget holds it: the widgets' own errors name their trait (or, for a tensor, fail on its truth)."""
    with pytest.raises(TypeError) as raised:
        Workbench(xss_model, xss_tokenizer, value)
    assert str(raised.value).startswith(f"the text must be a str, got {type(value).__name__} ")
    with pytest.raises(TypeError) as raised:
        Workbench(xss_model, xss_tokenizer, "the cat sat .", text_b=value)
    assert str(raised.value).startswith(f"text_b must be a str or None, got {type(value).__name__} ")
    with pytest.raises(TypeError, match="text_b must be a str or None"):
        AttentionPanel(model=xss_model, tokenizer=xss_tokenizer, text="the cat sat .", text_b=value)
