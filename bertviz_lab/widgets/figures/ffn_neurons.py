"""The feed-forward neurons of one layer as SVG drawings (CircuitsVis's text-neuron view, for BERT): which neurons
fire most at one token, how one neuron fires over every token of a text, and which corpus texts make it fire most.

An activation is a value of the hook point `encoder.layer.{i}.intermediate.act`: the feed-forward layer after its
activation (GELU for BERT), before the output projection. GELU's output is bounded below by about -0.17 and
unbounded above, so the colours are a sequential scale clipped at 0 (ColorBrewer Blues, the palette of every
sequential view: 0 and below are white, the scale's top the darkest blue); the exact value, negative or not, is in
every cell's hover text.

Every figure follows figures/cell_grid.py's contract: each neuron, token or corpus text is a `bvl-cell` with
data-row, data-col, the exact hover text (data-tip, activations to full precision) and a <title>, so the cell-grid
view's hover, keys and clicks read them. Text takes the theme's colours from figure.css; only the data colours
(bars, token boxes) are literal, each with the ink that reads on it.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.atlas import colour_codes
from bertviz_lab.widgets.figures.atlas import scale_top as nice_top
from bertviz_lab.widgets.figures.cell_grid import CELL_CLASS, cell_attributes, cell_title, exact
from bertviz_lab.widgets.figures.contrast import ink_class, ink_on
from bertviz_lab.widgets.figures.heatmap import (
    LABEL_FONT,
    NOTE_FONT,
    TITLE_FONT,
    band_colors,
    colorbar_across,
    figure_header,
)
from bertviz_lab.widgets.figures.nearest import cut_left, cut_right
from bertviz_lab.widgets.figures.tables import require_columns
from bertviz_lab.widgets.figures.text import escape, minus, short_token, text_width

ROW_H = 20  # px per neuron or corpus text
BAR_AREA = 320  # px the top-neuron bars span, from the smallest value (or 0) to the largest
LINE_W = 680  # px a line of the text figure holds before it wraps
BOX_H, BOX_GAP, LINE_PITCH = 20, 3, 26  # a token's box, the gap between boxes, the distance between lines
SCALE_TITLE = "activation after GELU (0 and below: white)"
CORPUS_COLUMNS = ("text_id", "position", "token", "activation", "left", "right")


def _values(activations: Any) -> np.ndarray:
    """Activations as a 1-D numpy array of their own float type (float64 for ints or Python floats)."""
    if hasattr(activations, "detach"):
        activations = activations.detach().cpu().numpy()
    values = np.asarray(activations)
    if not np.issubdtype(values.dtype, np.floating):
        values = values.astype(np.float64)
    return values.reshape(-1)


def at_token(position: int, token: str) -> str:
    """"5·paris": a token and its position, as titles and tips name it."""
    return f"{int(position)}·{token}"


def _hex(code: int) -> str:
    red, green, blue = D.PALETTE[code]
    return f"#{red:02x}{green:02x}{blue:02x}"


def _scale_ticks(top: float) -> list[tuple[float, str]]:
    return [(i / 4, minus(f"{round(i * top / 4, 12):g}")) for i in range(5)]


def _mark(x: float, y: float, width: float, height: float, **data: int) -> str:
    """The outline of the chosen cell (halo and line, heatmap.css), which clicks pass through."""
    attributes = "".join(f' data-{name}="{int(value)}"' for name, value in data.items())
    at = f'x="{x:g}" y="{y:g}" width="{width:g}" height="{height:g}"'
    return (f'<g class="bvl-selected-cell"{attributes}><rect class="bvl-heatmap-mark-halo" {at}/>'
            f'<rect class="bvl-heatmap-mark-line" {at}/></g>')


def top_neurons_svg(neurons: Sequence[int], activations: Any, layer: int, position: int, token: str,
                    title: str = "", note: str = "", selected: int | None = None) -> str:
    """The k most active neurons of one layer at one token as a standalone SVG document: one row each, in the order
    given (most active first), a bar from 0 to its activation and the value at full precision.

    Each row is a cell (data-row its rank, data-col 0: the up and down keys walk the ranking) with data-neuron;
    opening it chooses that neuron. `selected` (a neuron id) is outlined where it is among the rows.
    """
    ids = [int(n) for n in neurons]
    values = _values(activations)
    if len(ids) != len(values):
        raise ValueError(f"neurons and activations differ in length: {len(ids)} neurons, {len(values)} activations.")
    where = at_token(position, token)
    title = title or f"layer {layer} · the most active neurons at {where}"
    note = note or f"{len(ids)} feed-forward neurons with the largest activation after GELU at token {where}"
    finite = values[np.isfinite(values)].astype(np.float64)
    low, high = min(0.0, float(finite.min(initial=0.0))), max(0.0, float(finite.max(initial=0.0)))
    if high <= low:
        high = low + 1.0
    top = nice_top(values)
    codes = colour_codes(values, top)
    labels = [f"neuron {n}" for n in ids]
    shown = [minus(exact(v)) for v in values]
    label_w = math.ceil(max([text_width(t, LABEL_FONT, True) for t in labels] + [40])) + 16
    value_w = math.ceil(max([text_width(t, LABEL_FONT, True) for t in shown] + [40])) + 12
    top_y = 34 + (NOTE_FONT + 8 if note else 0) + 22
    left = 8 + label_w
    zero_x = left + BAR_AREA * (0.0 - low) / (high - low)
    total_w = max(left + BAR_AREA + value_w + 12, math.ceil(text_width(title, TITLE_FONT)) + 24,
                  math.ceil(text_width(note, NOTE_FONT)) + 20)
    total_h = top_y + max(len(ids), 1) * ROW_H + 12
    parts = figure_header("bvl-ffn-top-neurons", {"total_w": total_w, "total_h": total_h}, title, note)
    parts.append(f'<desc>{escape(SCALE_TITLE)}</desc>')
    parts.append(f'<text class="bvl-muted" x="8" y="{top_y - 8}">neuron</text>'
                 f'<text class="bvl-muted" x="{left}" y="{top_y - 8}">activation at {escape(where)}</text>')
    parts.append(f'<g class="bvl-ffn-neurons" data-layer="{int(layer)}" data-position="{int(position)}" '
                 f'data-rows="{len(ids)}">')
    for rank, (neuron, value) in enumerate(zip(ids, values)):
        y = top_y + rank * ROW_H
        tip = f"layer {int(layer)} · neuron {neuron} · at {where} · activation {exact(value)}"
        end = zero_x + BAR_AREA * (float(value) - 0.0) / (high - low) if np.isfinite(value) else zero_x
        x0, width = min(zero_x, end), max(abs(end - zero_x), 1.0)
        fill = _hex(int(codes[rank]))
        parts.append(f'<g class="{CELL_CLASS} bvl-ffn-neuron"{cell_attributes(rank, 0, tip)} data-neuron="{neuron}">'
                     f"{cell_title(tip)}"
                     f'<rect class="bvl-row-hit" x="4" y="{y}" width="{total_w - 8}" height="{ROW_H - 2}"/>'
                     f'<text class="bvl-mono" x="8" y="{y + 13}">{escape(labels[rank])}</text>'
                     f'<rect class="bvl-ffn-bar" x="{x0:.1f}" y="{y + 3}" width="{width:.1f}" height="{ROW_H - 8}" '
                     f'fill="{fill}"/>'
                     f'<text class="bvl-mono" x="{max(zero_x, end) + 6:.1f}" y="{y + 13}">{escape(shown[rank])}</text>'
                     "</g>")
    parts.append("</g>")
    parts.append(f'<line class="bvl-rule" x1="{zero_x:.1f}" x2="{zero_x:.1f}" y1="{top_y - 2}" '
                 f'y2="{top_y + max(len(ids), 1) * ROW_H - 2}"/>')
    if not ids:
        parts.append(f'<text class="bvl-muted" x="8" y="{top_y + 13}">no neuron</text>')
    if selected is not None and int(selected) in ids:
        rank = ids.index(int(selected))
        parts.append(_mark(4, top_y + rank * ROW_H, total_w - 8, ROW_H - 2, row=rank, col=0))
    parts.append("</svg>")
    return "".join(parts)


def wrap_tokens(widths: Sequence[float], line_width: float = LINE_W) -> list[tuple[int, float]]:
    """(line, x) of each box of `widths` laid out in reading order, a new line where the next box would pass
    `line_width` (a box wider than a line gets a line of its own)."""
    places, line, x = [], 0, 0.0
    for width in widths:
        if x > 0 and x + width > line_width:
            line, x = line + 1, 0.0
        places.append((line, x))
        x += width + BOX_GAP
    return places


def neuron_text_svg(tokens: Sequence[str], activations: Any, layer: int, neuron: int, title: str = "",
                    note: str = "", selected_position: int | None = None, scale_top: float | None = None) -> str:
    """One neuron's activation on every token of a text as a standalone SVG document: the tokens in reading order,
    wrapped into lines, each in a box coloured by its activation (Blues clipped at 0: 0 and below white, `scale_top`
    the darkest; default the largest activation rounded up), under a colour bar.

    Each token is a cell with data-row 0 and data-col its position (and data-line, data-position): the left and
    right keys walk the text in reading order across the lines; opening a token chooses that position.
    `selected_position` is outlined.
    """
    words = [str(t) for t in tokens]
    values = _values(activations)
    if len(words) != len(values):
        raise ValueError(f"tokens and activations differ in length: {len(words)} tokens, {len(values)} activations.")
    if scale_top is not None and not (math.isfinite(scale_top) and scale_top > 0):
        raise ValueError(f"scale_top must be a positive number, got {scale_top!r}.")
    top = float(scale_top) if scale_top is not None else nice_top(values)
    codes = colour_codes(values, top)
    title = title or f"layer {layer} · neuron {neuron} over the text"
    note = note or f"activation after GELU at each of {len(words)} tokens"
    labels = [short_token(w) for w in words]
    widths = [math.ceil(text_width(label, LABEL_FONT + 1, True)) + 10 for label in labels]
    places = wrap_tokens(widths)
    lines = (places[-1][0] + 1) if places else 1
    bar_y = 34 + (NOTE_FONT + 8 if note else 0) + 20
    top_y = bar_y + 10 + 30
    left = 8
    total_w = max(left + LINE_W + 8, math.ceil(text_width(title, TITLE_FONT)) + 24,
                  math.ceil(text_width(note, NOTE_FONT)) + 20)
    total_h = top_y + lines * LINE_PITCH + 8
    parts = figure_header("bvl-ffn-neuron-text", {"total_w": total_w, "total_h": total_h}, title, note)
    parts.append(f'<desc>{escape(SCALE_TITLE)}</desc>')
    parts.append(colorbar_across(left, bar_y, 240, 10, band_colors(D.PALETTE), _scale_ticks(top), SCALE_TITLE))
    parts.append(f'<g class="bvl-ffn-text" data-layer="{int(layer)}" data-neuron="{int(neuron)}" '
                 f'data-tokens="{len(words)}" data-top="{top:.6g}">')
    for position, (word, value) in enumerate(zip(words, values)):
        line, x = places[position]
        bx, by = left + x, top_y + line * LINE_PITCH
        fill = _hex(int(codes[position]))
        tip = (f"layer {int(layer)} · neuron {int(neuron)} · {at_token(position, word)} · "
               f"activation {exact(value)}")
        parts.append(f'<g class="{CELL_CLASS} bvl-ffn-token"{cell_attributes(0, position, tip)} '
                     f'data-position="{position}" data-line="{line}">{cell_title(tip)}'
                     f'<rect x="{bx:g}" y="{by}" width="{widths[position]}" height="{BOX_H}" rx="3" fill="{fill}"/>'
                     f'<text class="bvl-mono {ink_class(ink_on(fill))}" x="{bx + 5:g}" y="{by + 14}" '
                     f'font-size="{LABEL_FONT + 1}">{escape(labels[position])}</text></g>')
    parts.append("</g>")
    if not words:
        parts.append(f'<text class="bvl-muted" x="{left}" y="{top_y + 14}">no token</text>')
    if selected_position is not None and 0 <= int(selected_position) < len(words):
        line, x = places[int(selected_position)]
        parts.append(_mark(left + x - 1, top_y + line * LINE_PITCH - 1, widths[int(selected_position)] + 2,
                           BOX_H + 2, row=0, col=int(selected_position)))
    parts.append("</svg>")
    return "".join(parts)


def check_corpus_rows(rows: Any) -> None:
    """A one-line error when `rows` is not a Corpus.top_neuron_texts() table."""
    require_columns(rows, CORPUS_COLUMNS, "neuron texts",
                    f"Corpus.top_neuron_texts() gives {', '.join(CORPUS_COLUMNS)}")


def corpus_texts_svg(rows: Any, layer: int, neuron: int, title: str = "", note: str = "",
                     selected: int | None = None, scale_top: float | None = None) -> str:
    """The corpus texts where one neuron fires most (a Corpus.top_neuron_texts() table: text_id, position, token,
    activation, left, right), one row each: the activation, the text id and position, and the token in its
    context, the token's box coloured on the text figure's scale (default: the largest activation listed).

    Each row is a cell (data-row its rank, data-col 0; data-text-id, data-position): opening it opens the text.
    `selected` (a row) is outlined.
    """
    check_corpus_rows(rows)
    listed = list(zip(rows["text_id"].tolist(), rows["position"].tolist(), rows["token"].tolist(),
                      rows["activation"].tolist(), rows["left"].tolist(), rows["right"].tolist()))
    values = _values([row[3] for row in listed]) if listed else np.zeros(0)
    top = float(scale_top) if scale_top is not None else nice_top(values)
    codes = colour_codes(values, top)
    title = title or f"layer {layer} · neuron {neuron} · the corpus texts where it fires most"
    note = note or f"{len(listed)} texts, each at its token of largest activation"
    shown = [minus(exact(v)) for v in values]
    lefts, rights = [cut_left(str(r[4])) for r in listed], [cut_right(str(r[5])) for r in listed]
    value_w = math.ceil(max([text_width(t, LABEL_FONT, True) for t in shown] + [60])) + 12
    id_w = math.ceil(max([text_width(f"#{int(r[0])} · {int(r[1])}", LABEL_FONT, True) for r in listed] + [60])) + 12
    left_w = math.ceil(max([text_width(t, LABEL_FONT, True) for t in lefts] + [60]))
    token_w = math.ceil(max([text_width(short_token(str(r[2])), LABEL_FONT, True) for r in listed] + [30])) + 10
    right_w = math.ceil(max([text_width(t, LABEL_FONT, True) for t in rights] + [60]))
    x_id = 8 + value_w
    x_left = x_id + id_w
    x_token = x_left + left_w + 6
    x_right = x_token + token_w + 6
    top_y = 34 + (NOTE_FONT + 8 if note else 0) + 22
    total_w = max(x_right + right_w + 12, math.ceil(text_width(title, TITLE_FONT)) + 24,
                  math.ceil(text_width(note, NOTE_FONT)) + 20)
    total_h = top_y + max(len(listed), 1) * ROW_H + 12
    parts = figure_header("bvl-ffn-corpus-texts", {"total_w": total_w, "total_h": total_h}, title, note)
    for x, label, anchor in ((8, "activation", "start"), (x_id, "text · pos", "start"),
                             (x_left + left_w, "left context", "end"), (x_token, "token", "start"),
                             (x_right, "right context", "start")):
        parts.append(f'<text class="bvl-muted" x="{x}" y="{top_y - 8}" text-anchor="{anchor}">{label}</text>')
    parts.append(f'<g class="bvl-ffn-corpus" data-layer="{int(layer)}" data-neuron="{int(neuron)}" '
                 f'data-rows="{len(listed)}">')
    for rank, (text_id, position, token, value, left, right) in enumerate(listed):
        y = top_y + rank * ROW_H
        tip = (f"text {int(text_id)} · {at_token(int(position), str(token))} · activation "
               f"{exact(values[rank])} · {left} [{token}] {right}")
        fill = _hex(int(codes[rank]))
        parts.append(f'<g class="{CELL_CLASS} bvl-ffn-corpus-text"{cell_attributes(rank, 0, tip)} '
                     f'data-text-id="{int(text_id)}" data-position="{int(position)}">{cell_title(tip)}'
                     f'<rect class="bvl-row-hit" x="4" y="{y}" width="{total_w - 8}" height="{ROW_H - 2}"/>'
                     f'<text class="bvl-mono" x="8" y="{y + 13}">{escape(shown[rank])}</text>'
                     f'<text class="bvl-mono bvl-muted" x="{x_id}" y="{y + 13}">'
                     f"#{int(text_id)} · {int(position)}</text>"
                     f'<text class="bvl-mono" x="{x_left + left_w}" y="{y + 13}" text-anchor="end">'
                     f"{escape(lefts[rank])}</text>"
                     f'<rect x="{x_token}" y="{y + 1}" width="{token_w}" height="{ROW_H - 4}" rx="3" fill="{fill}"/>'
                     f'<text class="bvl-mono {ink_class(ink_on(fill))}" x="{x_token + 5}" y="{y + 13}">'
                     f"{escape(short_token(str(token)))}</text>"
                     f'<text class="bvl-mono" x="{x_right}" y="{y + 13}">{escape(rights[rank])}</text></g>')
    parts.append("</g>")
    if not listed:
        parts.append(f'<text class="bvl-muted" x="8" y="{top_y + 13}">no text</text>')
    if selected is not None and 0 <= int(selected) < len(listed):
        parts.append(_mark(4, top_y + int(selected) * ROW_H, total_w - 8, ROW_H - 2, row=int(selected), col=0))
    parts.append("</svg>")
    return "".join(parts)
