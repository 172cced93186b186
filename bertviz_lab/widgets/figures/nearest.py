"""Nearest contexts (exBERT's search) as one SVG drawing: the corpus tokens whose hidden state at a layer lies closest
(cosine) to a query token's, one row each — score, text id and position, the context on the left, the matched token
highlighted, the context on the right — and a histogram of which tokens matched.

Text takes the theme's colours from figure.css; the matched token's box is the one data colour of a row, with the
ink that reads on it, and the histogram's bars another. Every token and context is escaped; a long context is cut
at its far end with an ellipsis (its whole text stays in the row's tooltip).

What the live view's hover and keys need is written into the drawing as data- attributes: each match
(<g class="bvl-match">) has data-index (its row, best first), data-text-id, data-position and data-score; each bar
(<g class="bvl-token-count">) data-token and data-count.
"""

from __future__ import annotations

import collections
import math
from typing import Any

from bertviz_lab.widgets.figures.contrast import ink_class, ink_on
from bertviz_lab.widgets.figures.heatmap import LABEL_FONT, NOTE_FONT, TITLE_FONT, figure_header
from bertviz_lab.widgets.figures.palette import HEAD_COLORS
from bertviz_lab.widgets.figures.tables import require_columns
from bertviz_lab.widgets.figures.text import escape, short_token, text_width

MATCH_COLOR = HEAD_COLORS[1]  # the matched token's box: orange, apart from the atlas's blues
BAR_COLOR = HEAD_COLORS[0]
CONTEXT_CHARS = 42  # each side's context is cut to about this many characters
ROW_H = 22
HISTOGRAM_TOKENS = 12  # bars for the most frequent matched tokens; the rest are counted in one line
BAR_MAX_W = 220
COLUMNS = ("text_id", "position", "token", "left", "right", "score")


def check_matches(matches: Any) -> None:
    """A one-line error when `matches` is not a nearest() table."""
    require_columns(matches, COLUMNS, "matches", f"nearest() gives {', '.join(COLUMNS)}")


def cut_left(text: str, limit: int = CONTEXT_CHARS) -> str:
    """The end of `text`, at most `limit` characters, starting with "…" when cut."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1:]


def cut_right(text: str, limit: int = CONTEXT_CHARS) -> str:
    """The start of `text`, at most `limit` characters, ending with "…" when cut."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def token_counts(tokens: list[str]) -> list[tuple[str, int]]:
    """(token, count) of the matched tokens, most frequent first (ties in order of first match)."""
    counts = collections.Counter(tokens)
    first = {token: i for i, token in reversed(list(enumerate(tokens)))}
    return sorted(counts.items(), key=lambda item: (-item[1], first[item[0]]))


def score_text(score: float) -> str:
    """A cosine similarity as the rows and hover show it: four decimals."""
    return f"{float(score):.4f}"


def nearest_svg(matches: Any, query: str, layer: int, title: str = "", note: str = "",
                selected: int | None = None) -> str:
    """The matches of one nearest() search as a standalone SVG document: `query` names what was searched (a token
    and where it comes from), `layer` the hidden states compared; `selected` (a row) is outlined."""
    check_matches(matches)
    rows = list(zip(matches["text_id"].tolist(), matches["position"].tolist(), matches["token"].tolist(),
                    matches["left"].tolist(), matches["right"].tolist(), matches["score"].tolist()))
    title = title or f"nearest contexts · {query} · layer {layer}"
    note = note or f"{len(rows)} matches by cosine similarity of the hidden state at layer {layer}"
    lefts = [cut_left(r[3]) for r in rows]
    rights = [cut_right(r[4]) for r in rows]
    tokens = [str(r[2]) for r in rows]
    mono = LABEL_FONT
    left_w = math.ceil(max((text_width(t, mono, True) for t in lefts), default=0))
    token_w = math.ceil(max([text_width(short_token(t), mono, True) for t in tokens] + [text_width("match", 11)])) + 10
    right_w = math.ceil(max((text_width(t, mono, True) for t in rights), default=0))
    x_id, x_left = 66, 150
    x_token = x_left + left_w + 6
    x_right = x_token + token_w + 6
    top = 30 + NOTE_FONT + 8 + 14
    counts = token_counts(tokens)
    shown = counts[:HISTOGRAM_TOKENS]
    hist_y = top + len(rows) * ROW_H + 36
    hist_label_w = math.ceil(max((text_width(short_token(t), mono, True) for t, _ in shown), default=0)) + 12
    hist_h = (len(shown) + (1 if len(counts) > len(shown) else 0)) * 18 + 10 if rows else 0
    total_w = max(x_right + right_w + 12, math.ceil(text_width(title, TITLE_FONT)) + 24,
                  math.ceil(text_width(note, NOTE_FONT)) + 20, 8 + hist_label_w + BAR_MAX_W + 60)
    total_h = hist_y + hist_h + 8
    parts = figure_header("bvl-nearest", {"total_w": total_w, "total_h": total_h}, title, note)
    head_y = top - 6
    for x, label, anchor in ((8, "score", "start"), (x_id, "text · pos", "start"),
                             (x_left + left_w, "left context", "end"), (x_token, "match", "start"),
                             (x_right, "right context", "start")):
        parts.append(f'<text class="bvl-muted" x="{x}" y="{head_y}" font-size="11" text-anchor="{anchor}">'
                     f"{label}</text>")
    parts.append(f'<line class="bvl-grid" x1="4" x2="{total_w - 4}" y1="{head_y + 5}" y2="{head_y + 5}"/>')
    ink = ink_class(ink_on(MATCH_COLOR))
    parts.append(f'<g class="bvl-matches" data-rows="{len(rows)}">')
    for index, (text_id, position, token, left, right, score) in enumerate(rows):
        y = top + index * ROW_H + 14
        whole = f"#{int(text_id)} · {left} [{token}] {right}"
        parts.append(f'<g class="bvl-match" data-index="{index}" data-text-id="{int(text_id)}" '
                     f'data-position="{int(position)}" data-score="{float(score):.6g}">'
                     f'<title>{escape(whole)}</title>'
                     f'<rect class="bvl-row-hit" x="4" y="{y - 15}" width="{total_w - 8}" height="{ROW_H - 2}"/>'
                     f'<text class="bvl-mono" x="8" y="{y}">{score_text(score)}</text>'
                     f'<text class="bvl-mono bvl-muted" x="{x_id}" y="{y}">#{int(text_id)} · {int(position)}</text>'
                     f'<text class="bvl-mono" x="{x_left + left_w}" y="{y}" text-anchor="end">'
                     f"{escape(lefts[index])}</text>"
                     f'<rect class="bvl-match-box" x="{x_token}" y="{y - 13}" width="{token_w}" height="17" '
                     f'rx="3" fill="{MATCH_COLOR}"/>'
                     f'<text class="bvl-mono {ink} bvl-match-token" x="{x_token + 5}" y="{y}">'
                     f"{escape(short_token(str(token)))}</text>"
                     f'<text class="bvl-mono" x="{x_right}" y="{y}">{escape(rights[index])}</text></g>')
    parts.append("</g>")
    if selected is not None and 0 <= int(selected) < len(rows):
        y = top + int(selected) * ROW_H + 14
        at = f'x="4" y="{y - 15}" width="{total_w - 8}" height="{ROW_H - 2}"'
        parts.append(f'<g class="bvl-selected-cell" data-index="{int(selected)}">'
                     f'<rect class="bvl-heatmap-mark-halo" {at}/><rect class="bvl-heatmap-mark-line" {at}/></g>')
    if not rows:
        parts.append(f'<text class="bvl-muted" x="8" y="{top + 14}">no match</text>')
    else:
        parts.append(histogram(counts, 8, hist_y, hist_label_w))
    parts.append("</svg>")
    return "".join(parts)


def histogram(counts: list[tuple[str, int]], x: float, y: float, label_w: float) -> str:
    """Horizontal bars of the most frequent matched tokens, each labelled with its count."""
    shown = counts[:HISTOGRAM_TOKENS]
    most = max((c for _, c in shown), default=1)
    parts = [f'<g class="bvl-histogram" data-tokens="{len(counts)}">',
             f'<text class="bvl-histogram-title" x="{x}" y="{y - 12}" font-size="12" font-weight="bold">'
             f"matched tokens ({len(counts)} different)</text>"]
    for index, (token, count) in enumerate(shown):
        ty = y + index * 18
        width = max(1.0, BAR_MAX_W * count / most)
        parts.append(f'<g class="bvl-token-count" data-token="{escape(token)}" data-count="{count}">'
                     f'<title>{escape(token)}: {count}</title>'
                     f'<text class="bvl-mono" x="{x + label_w - 6}" y="{ty + 4}" text-anchor="end">'
                     f"{escape(short_token(token))}</text>"
                     f'<rect x="{x + label_w}" y="{ty - 7}" width="{width:.1f}" height="13" fill="{BAR_COLOR}"/>'
                     f'<text class="bvl-mono" x="{x + label_w + width + 5:.1f}" y="{ty + 4}">{count}</text></g>')
    rest = counts[len(shown):]
    if rest:
        others = sum(c for _, c in rest)
        parts.append(f'<text class="bvl-muted" x="{x}" y="{y + len(shown) * 18 + 4}">'
                     f"… and {len(rest)} other tokens ({others} matches)</text>")
    parts.append("</g>")
    return "".join(parts)
