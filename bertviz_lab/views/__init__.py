"""bertviz's head_view, model_view and heatmap calls for any model's attention: the tuple of per-layer
(batch 1, heads, queries, keys) weights a transformers model returns with output_attentions=True, and its tokens (or
an encoder-decoder's encoder, decoder and cross attention), shown in this package's own views.

Each call returns an AttentionMapsPanel (displayed when it is the cell's last value): offline, exportable with
`.save("x.svg")` or PNG, keeping a static copy in the saved notebook and surviving a page reload.
`html_action="return"` gives an offline HTML page of the figures instead, as an IPython HTML object; the head
view's page carries every layer with a layer switch and hover, as bertviz's does (views.head_view_page).

`bertviz_lab.views.neuron_view.show` is bertviz's neuron view (it needs the model, not only its attentions).
"""

from __future__ import annotations

from typing import Any, Sequence

from bertviz_lab.util.files import shown
from bertviz_lab.views.head_view_page import head_view_page
from bertviz_lab.views.inputs import AttentionSet, attention_sets, check_html_action, pretty_token
from bertviz_lab.views.page import html_object, offline_page
from bertviz_lab.views.panel import AttentionMapsPanel
from bertviz_lab.widgets import registry

__all__ = ["head_view", "model_view", "heatmap", "AttentionMapsPanel", "AttentionSet", "attention_sets",
           "pretty_token"]


def _shown(view: str, sets: list[AttentionSet], html_action: Any, theme: str, layer: int | None = None,
           heads: Sequence[int] | None = None, model_view_heads: Sequence[int] | None = None) -> Any:
    """The panel on `view`, or (html_action="return") the offline page of its figure for every attention set."""
    action = check_html_action(html_action)
    panel = AttentionMapsPanel(sets, view=view, layer=layer, heads=heads, model_view_heads=model_view_heads)
    if action == "view":
        return panel
    try:
        if view == registry.HEAD_VIEW:  # bertviz's page: every layer, a layer switch, hover
            return html_object(head_view_page(sets, layer, heads, theme))
        return html_object(offline_page(panel.every_set_svg(), f"bertviz-lab {view}", theme))
    finally:
        panel.close()


def head_view(attention: Any = None, tokens: Sequence[str] | None = None, sentence_b_start: int | None = None,
              prettify_tokens: bool = True, layer: int | None = None, heads: Sequence[int] | None = None,
              encoder_attention: Any = None, decoder_attention: Any = None, cross_attention: Any = None,
              encoder_tokens: Sequence[str] | None = None, decoder_tokens: Sequence[str] | None = None,
              include_layers: Sequence[int] | None = None, html_action: str = "view") -> Any:
    """bertviz's head_view: query tokens left, key tokens right, a line per head and (query, key); `layer` and
    `heads` are the ones shown first."""
    sets = attention_sets(attention, tokens, sentence_b_start, prettify_tokens, encoder_attention, decoder_attention,
                          cross_attention, encoder_tokens, decoder_tokens, include_layers)
    return _shown(registry.HEAD_VIEW, sets, html_action, "light", layer=layer, heads=heads)


def model_view(attention: Any = None, tokens: Sequence[str] | None = None, sentence_b_start: int | None = None,
               prettify_tokens: bool = True, display_mode: str = "dark", encoder_attention: Any = None,
               decoder_attention: Any = None, cross_attention: Any = None,
               encoder_tokens: Sequence[str] | None = None, decoder_tokens: Sequence[str] | None = None,
               include_layers: Sequence[int] | None = None, include_heads: Sequence[int] | None = None,
               html_action: str = "view") -> Any:
    """bertviz's model_view: every layer × head as a thumbnail under one colour scale; a thumbnail clicked opens
    it in the heatmap. display_mode ("dark", bertviz's default, or "light") is the theme of the
    html_action="return" page; the live view follows JupyterLab's theme."""
    if display_mode not in ("dark", "light"):  # refused in either html_action, not only where a page is drawn
        raise ValueError(f"display_mode must be 'dark' or 'light', got {shown(display_mode)}.")
    sets = attention_sets(attention, tokens, sentence_b_start, prettify_tokens, encoder_attention, decoder_attention,
                          cross_attention, encoder_tokens, decoder_tokens, include_layers)
    return _shown(registry.MODEL_VIEW, sets, html_action, display_mode, model_view_heads=include_heads)


def heatmap(attention: Any = None, tokens: Sequence[str] | None = None, sentence_b_start: int | None = None,
            prettify_tokens: bool = True, layer: int | None = None, heads: Sequence[int] | None = None,
            encoder_attention: Any = None, decoder_attention: Any = None, cross_attention: Any = None,
            encoder_tokens: Sequence[str] | None = None, decoder_tokens: Sequence[str] | None = None,
            include_layers: Sequence[int] | None = None, html_action: str = "view") -> Any:
    """One head's attention as a matrix (rows: query tokens, columns: key tokens), with bertviz's arguments;
    `layer` and the first of `heads` are shown first."""
    sets = attention_sets(attention, tokens, sentence_b_start, prettify_tokens, encoder_attention, decoder_attention,
                          cross_attention, encoder_tokens, decoder_tokens, include_layers)
    return _shown(registry.HEATMAP, sets, html_action, "light", layer=layer, heads=heads)
