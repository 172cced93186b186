"""head_view(..., html_action="return"): bertviz's page, whole and offline: every layer of every attention set (a
sentence pair's slices, or an encoder-decoder's encoder, decoder and cross attention) with every query, a switch
for the layer and the attention, and hover that singles out a token's lines; no script at all.

The switch is a pair of radio groups (a keyboard moves them with the arrow keys) and one CSS rule per figure that
shows it while its two buttons are checked (`:has()`); a check box per head hides its lines, as bertviz's head
chips do. Hovering a query token hides every other query's lines, a key
token every line that does not end at it (one rule per row). Each figure is the head view's own drawing with every
row; each query keeps lines to its PAGE_K strongest keys of weight PAGE_MIN_WEIGHT or more: at 600 tokens, 12
layers and 12 heads that is a few MB, where every weight of every layer would be hundreds.
"""

from __future__ import annotations

from typing import Sequence

from bertviz_lab.views.inputs import AttentionSet
from bertviz_lab.views.page import POLICY
from bertviz_lab.widgets.figures.head_view import head_view_svg
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.figures.theme import background, check_theme, resolve
from bertviz_lab.widgets.views.front_end import all_css

PAGE_K = 8  # lines kept per query and head: its strongest keys...
PAGE_MIN_WEIGHT = 0.05  # ... of at least this weight (a line this faint is barely drawn)

SWITCH_CSS = """
body { color: var(--jp-ui-font-color1, #1a1a1a); font: 13px system-ui, sans-serif; }
.bvl-switches { display: flex; flex-wrap: wrap; gap: 8px 24px; margin-bottom: 12px; }
.bvl-switch { border: 0; margin: 0; padding: 0; display: flex; flex-wrap: wrap; align-items: center; gap: 4px; }
.bvl-switch legend { float: left; margin-right: 6px; color: var(--jp-ui-font-color2, #595959); }
.bvl-switch input { position: absolute; opacity: 0; width: 1px; height: 1px; }
.bvl-switch label { padding: 2px 8px; border: 1px solid var(--jp-border-color1, #8a8a8a); border-radius: 3px;
  cursor: pointer; background: var(--jp-layout-color1, #ffffff); }
.bvl-switch input:checked + label { background: var(--jp-brand-color1, #1976d2);
  border-color: var(--jp-brand-color1, #1976d2); color: var(--jp-layout-color0, #ffffff); }
.bvl-switch input:focus-visible + label { outline: 2px solid var(--jp-brand-color1, #1976d2); outline-offset: 2px; }
.bvl-page-figure, .bvl-page-missing { display: none; }
.bvl-page-missing { color: var(--jp-ui-font-color2, #595959); }
"""


def _radio(group: str, index: int, label: str, checked: bool) -> str:
    return (f'<input type="radio" name="bvl-{group}" id="bvl-{group}-{index}" value="{index}"'
            f'{" checked" if checked else ""}><label for="bvl-{group}-{index}">{escape(label)}</label>')


def _switch(group: str, legend: str, labels: Sequence[str], chosen: int) -> str:
    radios = "".join(_radio(group, i, label, i == chosen) for i, label in enumerate(labels))
    return f'<fieldset class="bvl-switch" data-group="{group}"><legend>{escape(legend)}</legend>{radios}</fieldset>'


def _shown_rule(s: int, layer_index: int, what: str) -> str:
    return (f'body:has(#bvl-set-{s}:checked):has(#bvl-layer-{layer_index}:checked) '
            f'.{what}[data-set="{s}"][data-layer-index="{layer_index}"] {{ display: block; }}')


def _head_switch(num_heads: int, heads: Sequence[int] | None) -> tuple[str, str]:
    """A check box per head (those of `heads` checked, default all); unchecked, a head's lines go and its chip fades."""
    on = set(range(num_heads) if heads is None else heads)
    boxes = "".join(f'<input type="checkbox" id="bvl-head-{h}" value="{h}"{" checked" if h in on else ""}>'
                    f'<label for="bvl-head-{h}">{h}</label>' for h in range(num_heads))
    rules = "\n".join(f'body:has(#bvl-head-{h}:not(:checked)) .bvl-head-lines[data-head="{h}"] {{ display: none; }}\n'
                       f'body:has(#bvl-head-{h}:not(:checked)) .bvl-head-chip[data-head="{h}"] {{ opacity: 0.3; }}'
                       for h in range(num_heads))
    return f'<fieldset class="bvl-switch" data-group="head"><legend>heads</legend>{boxes}</fieldset>', rules


def _hover_rules(rows: int) -> str:
    """Hovering query row i keeps only its lines; hovering key row j keeps only the lines that end at it."""
    rules = []
    for i in range(rows):
        rules.append(f'.bvl-page-figure:has(text.bvl-query[data-index="{i}"]:hover) .bvl-head-lines > '
                     f'g:not([data-q="{i}"]) {{ visibility: hidden; }}')
        rules.append(f'.bvl-page-figure:has(text.bvl-key[data-index="{i}"]:hover) .bvl-head-lines '
                     f'line:not([data-key="{i}"]) {{ visibility: hidden; }}')
    return "\n".join(rules)


def head_view_figure(chosen: AttentionSet, layer: int, k: int = PAGE_K, min_weight: float = PAGE_MIN_WEIGHT) -> str:
    """One attention set's head view at `layer` (the model's number) with every query and the lines of every head
    (the page's head switch hides some): the page's figure."""
    maps = chosen.maps[chosen.layers.index(layer)]  # (heads, queries, keys)
    weights, index = maps.topk(max(1, min(k, maps.shape[-1])), dim=-1)
    title = " · ".join(part for part in (chosen.label, f"layer {layer}") if part)
    return head_view_svg(chosen.query_tokens, chosen.key_tokens, index.numpy(), weights.numpy(),
                         range(chosen.num_heads), title, rows=max(len(chosen.query_tokens), len(chosen.key_tokens), 1),
                         query_positions=chosen.query_positions, min_weight=min_weight, title_heads=False)


def head_view_page(sets: Sequence[AttentionSet], layer: int | None = None, heads: Sequence[int] | None = None,
                   theme: str = "light", k: int = PAGE_K, min_weight: float = PAGE_MIN_WEIGHT) -> str:
    """The offline page: every set × layer's head view, the one for the first set and `layer` (default: the first)
    shown first, with the attention and layer switches and a check box per head (`heads` checked, default all)."""
    layers = sorted({n for chosen in sets for n in chosen.layers}, key=lambda n: (n < 0, n))
    start = layers.index(layer) if layer in layers else 0
    figures, rules, rows = [], [], 1
    for s, chosen in enumerate(sets):
        rows = max(rows, len(chosen.query_tokens), len(chosen.key_tokens))
        for i, number in enumerate(layers):
            where = f'data-set="{s}" data-layer-index="{i}" data-layer="{number}"'
            if number in chosen.layers:
                figures.append(f"<div class='bvl-figure bvl-attention bvl-page-figure' {where}>"
                               f"{head_view_figure(chosen, number, k, min_weight)}</div>")
                rules.append(_shown_rule(s, i, "bvl-page-figure"))
            else:
                figures.append(f"<p class='bvl-page-missing' {where}>{escape(chosen.label or 'this attention')} has "
                               f"no layer {number}.</p>")
                rules.append(_shown_rule(s, i, "bvl-page-missing"))
    switches = [_switch("set", "attention", [chosen.name or "all" for chosen in sets], 0)] if len(sets) > 1 else \
        ['<input type="radio" name="bvl-set" id="bvl-set-0" value="0" checked hidden>']
    switches.append(_switch("layer", "layer", [str(n) for n in layers], start))
    head_boxes, head_rules = _head_switch(max(chosen.num_heads for chosen in sets), heads)
    switches.append(head_boxes)
    theme = check_theme(theme)
    css = resolve("\n".join([all_css(), SWITCH_CSS, *rules, head_rules, _hover_rules(rows)]), theme)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{POLICY}\">"
            f"<meta name='generator' content='bertviz-lab views'><title>bertviz-lab head view</title>"
            f"<style>body {{ background: {background(theme)}; margin: 16px; }}\n{css}</style></head>"
            f"<body><form class='bvl-switches' aria-label='attention and layer shown'>{''.join(switches)}</form>"
            f"{''.join(figures)}</body></html>")
