"""SaliencyPanel: which input tokens an output rests on, each token coloured by its saliency score.

The scores come from `bertviz_lab.trace.saliency` (integrated gradients or gradient × input on the word embeddings).
The view (static/saliency_view.js) draws only from its synced state: tokens, their exact float32 scores, the colours
and pixel positions computed here, so a reload or a second tab draws the same figure, and `saliency_svg` writes the
same figure as a standalone SVG document for exports and the static copy. Token text is always escaped.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
from collections.abc import Mapping
from typing import Any

import anywidget
import ipywidgets as widgets
import numpy as np
import torch
import traitlets

from bertviz_lab.model.encoding import EncodedText, Truncation, encode_text
from bertviz_lab.trace.saliency import BASELINES, METHODS, check_choice, check_count, named_outputs, saliency
from bertviz_lab.widgets.attention_views import short_token
from bertviz_lab.widgets.common import Panel, escape, evaluating, model_lock, notice_html
from bertviz_lab.widgets.export import ExportBar
from bertviz_lab.widgets.front_end import esm
from bertviz_lab.widgets.svg import nice_ticks, text_width
from bertviz_lab.widgets.text_run import TextRun

METHOD_NAMES = {"integrated_gradients": "integrated gradients", "gradient_x_input": "gradient × input"}
BASELINE_NAMES = {"pad": "[PAD]", "mask": "[MASK]"}
DEFAULT_TEXT = "The cat sat on the mat because it was warm."
DEFAULT_MASKED_TEXT = "The cat sat on the [MASK] because it was warm."
MAX_STEPS = 1024
TOP_PREDICTIONS = 3  # predicted tokens offered per [MASK]
MAX_MASKS = 8  # [MASK] positions offered as targets
MAX_POSITIONS = 64  # token positions offered (token classification, MLM without a [MASK])
MAX_LABELS = 50  # classes offered
CACHE_SIZE = 32  # computed score vectors kept per panel

# drawing: one layout, computed here and sent to the browser, so the live view and the SVG are one drawing
FONT, TITLE_FONT, NOTE_FONT = 13, 14, 12
PAD_X, BOX_H, GAP, LINE_H = 5, 22, 4, 30
WRAP_W = 720  # px of tokens per line before wrapping
MARGIN, GUTTER = 10, 24  # left margin; room for the A / B labels of a sentence pair
BAR_W, BAR_H = 260, 12
# ColorBrewer RdBu (9 classes), blue for negative, near-white at zero, red for positive
ANCHORS = ("#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d", "#b2182b")
CODES = 255  # palette entries; code 127 is exactly zero


def _palette() -> np.ndarray:
    anchors = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in ANCHORS], dtype=float)
    at = np.linspace(0, 1, len(anchors))
    t = np.linspace(0, 1, CODES)
    return np.rint(np.stack([np.interp(t, at, anchors[:, k]) for k in range(3)], axis=1)).astype(np.uint8)


PALETTE = _palette()  # (CODES, 3) uint8


def color_code(value: float, limit: float) -> int:
    """The palette index of a score on the symmetric scale [-limit, limit] (the middle code is zero)."""
    if not limit > 0 or not math.isfinite(value):
        return CODES // 2
    t = min(1.0, max(-1.0, value / limit))
    return int(round((t + 1) / 2 * (CODES - 1)))


def hex_color(code: int) -> str:
    """#rrggbb of a palette code."""
    red, green, blue = PALETTE[code]
    return f"#{red:02x}{green:02x}{blue:02x}"


def score_text(value: float) -> str:
    """A score as hover shows it: seven significant digits, all a float32 holds."""
    return f"{value:.7g}"


def _tick_text(value: float) -> str:
    return "0" if value == 0 else f"{value:.3g}"


def colorbar_ticks(limit: float) -> list[list[Any]]:
    """[position 0..1 from the left, label] of the colour bar: -limit, 0, +limit and round values between."""
    if not limit > 0:
        return [[0.5, "0"]]
    ticks = {0.0: -limit, 0.5: 0.0, 1.0: limit}
    for value in nice_ticks(-limit, limit, 4):
        position = (value + limit) / (2 * limit)
        if all(abs(position - kept) >= 0.15 for kept in ticks):
            ticks[position] = value
    return [[position, _tick_text(ticks[position])] for position in sorted(ticks)]


# targets ---------------------------------------------------------------------------------------------------------
def sequence_output(output: Any) -> torch.Tensor:
    """The last layer's token vectors (B, T, C) from a backbone's output (named tuple, dict or plain tuple)."""
    if isinstance(output, Mapping):
        for name in ("last_hidden_state", "sequence_output"):
            if isinstance(output.get(name), torch.Tensor):
                return output[name]
    hidden = getattr(output, "last_hidden_state", None)
    if isinstance(hidden, torch.Tensor):
        return hidden
    if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise ValueError(f"the model's output ({type(output).__name__}) holds no token vectors to score.")


def cls_norm(output: Any) -> torch.Tensor:
    """The length of the last layer's [CLS] vector, one score per row."""
    return sequence_output(output)[:, 0].norm(dim=-1)


def mean_norm(output: Any) -> torch.Tensor:
    """The length of the mean of the last layer's token vectors: a sentence embedding, pooled as MiniLM's is."""
    return sequence_output(output).mean(dim=1).norm(dim=-1)


@dataclasses.dataclass(frozen=True)
class HiddenUnit:
    """One unit of the last layer's [CLS] vector as the target."""

    unit: int

    def __call__(self, output: Any) -> torch.Tensor:
        hidden = sequence_output(output)
        if not 0 <= self.unit < hidden.shape[-1]:
            raise ValueError(f"hidden unit {self.unit} does not exist; the model's vectors have units "
                             f"0..{hidden.shape[-1] - 1}.")
        return hidden[:, 0, self.unit]


@dataclasses.dataclass(frozen=True)
class OutputLogit:
    """One logit of a tuple output, e.g. the question-answering start logit at a position."""

    index: int
    position: int

    def __call__(self, output: Any) -> torch.Tensor:
        return output[self.index][:, self.position]


@dataclasses.dataclass(frozen=True)
class TargetChoice:
    """One target the toolbar offers: its key, its label in the chooser, its name in the figure, and what saliency
    receives (a shorthand or a callable); `unit` marks the [CLS] hidden-unit target, whose unit is picked beside."""

    key: str
    label: str
    title: str
    target: Any
    unit: bool = False


def _quoted(token: str) -> str:
    return f"“{token}”"


def _is_decoder(model: torch.nn.Module) -> bool:
    return bool(getattr(getattr(model, "config", None), "is_decoder", False))


def _label_names(model: torch.nn.Module, count: int) -> list[str]:
    config = getattr(model, "config", None)
    names = config.label_names() if callable(getattr(config, "label_names", None)) else []
    return [names[i] if i < len(names) else f"LABEL_{i}" for i in range(count)]


def target_choices(model: torch.nn.Module, tokenizer: Any, encoding: Mapping[str, torch.Tensor],
                   output: Any) -> tuple[list[TargetChoice], str, str]:
    """The targets that fit the model's heads and the text, the default one's key, and a note on the default.

    `output` is what the model's forward returned on `encoding`: its predictions name the offered tokens and labels.
    The default: the top prediction at the first [MASK], else NSP for a pair, else the predicted class (or token
    label, or answer start), else the length of the backbone's [CLS] vector.
    """
    named = {k: v for k, v in named_outputs(model, output).items() if isinstance(v, torch.Tensor)}
    ids = encoding["input_ids"][0].tolist()
    tokens = tokenizer.convert_ids_to_tokens(ids)
    special = encoding["special_tokens_mask"][0].tolist() if "special_tokens_mask" in encoding else [0] * len(ids)
    types = encoding["token_type_ids"][0].tolist() if "token_type_ids" in encoding else [0] * len(ids)
    plain = [p for p, s in enumerate(special) if not s]
    ordinary = plain[:MAX_POSITIONS]
    choices: list[TargetChoice] = []
    ranked: dict[str, str] = {}  # kind of default -> the key of its choice
    note = ""

    def name(token_id: int) -> str:
        return tokenizer.convert_ids_to_tokens([token_id])[0]

    mlm = named.get("mlm_logits")
    if mlm is not None and mlm.dim() == 3 and _is_decoder(model):
        last = plain[-1] if plain else len(ids) - 1  # the text's last word, not the [SEP] after it
        for rank, token_id in enumerate(mlm[0, last].float().topk(TOP_PREDICTIONS).indices.tolist(), start=1):
            choices.append(TargetChoice(
                f"next:{last}:{token_id}", f"next token after {tokens[last]} → {name(token_id)} (top {rank})",
                f"logit of {_quoted(name(token_id))} as the token after {_quoted(tokens[last])} (top {rank})",
                ("mlm", last, token_id)))
        ranked["next"] = choices[0].key
    elif mlm is not None and mlm.dim() == 3:
        masks = [p for p, i in enumerate(ids) if i == tokenizer.mask_token_id][:MAX_MASKS]
        for position in masks:
            top = mlm[0, position].float().topk(TOP_PREDICTIONS).indices.tolist()
            for rank, token_id in enumerate(top, start=1):
                choices.append(TargetChoice(
                    f"mlm:{position}:{token_id}", f"[MASK] at {position} → {name(token_id)} (top {rank})",
                    f"MLM logit of {_quoted(name(token_id))} at position {position} ([MASK], top {rank})",
                    ("mlm", position, token_id)))
        if masks:
            ranked["mask"] = choices[0].key
        else:
            for position in ordinary:
                choices.append(TargetChoice(
                    f"mlm:{position}:{ids[position]}", f"MLM: {tokens[position]} at {position} (the word itself)",
                    f"MLM logit of {_quoted(tokens[position])} at position {position} (the word itself)",
                    ("mlm", position, ids[position])))
            if ordinary:
                ranked["word"] = f"mlm:{ordinary[0]}:{ids[ordinary[0]]}"
                note = "no [MASK] in the text: put one in to see what the model predicts there"
    nsp = named.get("nsp_logits")
    if nsp is not None and nsp.dim() == 2:
        choices.append(TargetChoice("nsp", "NSP: IsNext logit", "NSP logit of IsNext (B follows A)", "nsp"))
        ranked["pair" if any(types) else "nsp"] = "nsp"
    classes = named.get("class_logits")
    if classes is not None and classes.dim() == 2:
        count, predicted = classes.shape[1], int(classes[0].argmax())
        if count == 1:
            choices.append(TargetChoice("class:0", "score (regression)", "the regression score", ("class", 0)))
        for label, label_name in enumerate(_label_names(model, count)[:MAX_LABELS] if count > 1 else []):
            mark = " (predicted)" if label == predicted else ""
            choices.append(TargetChoice(f"class:{label}", f"class: {label_name}{mark}",
                                        f"logit of class {_quoted(label_name)}{mark}", ("class", label)))
        ranked["class"] = f"class:{predicted if count > 1 else 0}"
    per_token = named.get("token_logits")
    if per_token is not None and per_token.dim() == 3:
        names = _label_names(model, per_token.shape[-1])
        for position in ordinary:
            label = int(per_token[0, position].argmax())
            choices.append(TargetChoice(
                f"token:{position}:{label}", f"token {position} {tokens[position]} → {names[label]} (predicted)",
                f"logit of {_quoted(names[label])} for {_quoted(tokens[position])} at position {position} (predicted)",
                ("token", position, label)))
            ranked.setdefault("token", choices[-1].key)
    for index, which in enumerate(("start", "end")):
        logits = named.get(f"{which}_logits")
        if logits is not None and logits.dim() == 2 and isinstance(output, tuple):
            position = int(logits[0].argmax())
            choices.append(TargetChoice(
                f"{which}:{position}", f"answer {which} at {position} {tokens[position]} (predicted)",
                f"answer-{which} logit at position {position} {_quoted(tokens[position])} (predicted)",
                OutputLogit(index, position)))
            ranked.setdefault("answer", choices[-1].key)
    if "last_hidden_state" in named or "sequence_output" in named:
        choices += [
            TargetChoice("cls-norm", "length of the [CLS] output vector",
                         "length of the last layer's [CLS] vector", cls_norm),
            TargetChoice("mean-norm", "length of the mean output vector",
                         "length of the mean of the last layer's token vectors (sentence embedding)", mean_norm),
            TargetChoice("cls-unit", "one unit of the [CLS] output vector", "one unit of the [CLS] vector", None,
                         unit=True),
        ]
        ranked["backbone"] = "cls-norm"
    order = ("mask", "pair", "class", "token", "answer", "next", "word", "nsp", "backbone")
    kind = next((kind for kind in order if kind in ranked), "")
    if kind == "backbone":
        note = "no task head: the target is a function of the backbone's output"
    return choices, ranked.get(kind, ""), note if kind in ("word", "backbone") else ""


# drawing ---------------------------------------------------------------------------------------------------------
def _text_w(text: str, size: float, monospace: bool = False) -> float:
    return text_width(text, size, monospace=monospace)


def saliency_layout(labels: list[str], segments: list[int], title: str, subtitle: str, note: str,
                    bar_ticks: list[list[Any]], bar_title: str) -> tuple[list[list[float]], list[list[Any]], dict]:
    """Boxes [x, y, width] of the tokens in reading order, wrapped at WRAP_W (sentence B on a line of its own), the
    A / B labels [y, text] in the gutter, and the figure's geometry (the live view draws with the same numbers)."""
    pair = any(segments)
    left = MARGIN + (GUTTER if pair else 0)
    lines = [line for line in (title, subtitle, note) if line]
    top = 8 + 20 * len(lines) + 10
    boxes: list[list[float]] = []
    gutter: list[list[Any]] = []
    x, y, right = float(left), float(top), float(left)
    for index, label in enumerate(labels):
        width = math.ceil(_text_w(label, FONT, monospace=True)) + 2 * PAD_X
        new_segment = pair and index > 0 and segments[index] != segments[index - 1]
        if index and (new_segment or (x > left and x + width > left + WRAP_W)):
            x, y = float(left), y + LINE_H
        if pair and (index == 0 or new_segment):
            gutter.append([y, "B" if segments[index] else "A"])
        boxes.append([x, y, width])
        right = max(right, x + width)
        x += width + GAP
    tokens_bottom = (y + BOX_H) if labels else top
    bar_title_y = tokens_bottom + 24
    bar_y = bar_title_y + 8
    half_tick = max((_text_w(t[1], 11, monospace=True) for t in bar_ticks), default=0) / 2
    bar_x = math.ceil(MARGIN + half_tick)
    total_w = math.ceil(max(right + MARGIN, bar_x + BAR_W + half_tick + MARGIN,
                            _text_w(title, TITLE_FONT) * 1.05 + 2 * MARGIN,
                            _text_w(subtitle, NOTE_FONT) * 1.05 + 2 * MARGIN,
                            _text_w(note, NOTE_FONT) * 1.05 + 2 * MARGIN,
                            _text_w(bar_title, NOTE_FONT) * 1.05 + 2 * MARGIN))
    geometry = {"left": left, "top": top, "box_h": BOX_H, "font": FONT, "bar_x": bar_x, "bar_y": bar_y,
                "bar_w": BAR_W, "bar_h": BAR_H, "bar_title_y": bar_title_y, "total_w": total_w,
                "total_h": math.ceil(bar_y + BAR_H + 26)}
    return boxes, gutter, geometry


def _header(state: dict[str, Any]) -> list[tuple[str, str, int, str, str]]:
    """(class, text, font size, weight, colour) of the title lines shown."""
    rows = [("bvl-title", state["title"], TITLE_FONT, "bold", "#111"),
            ("bvl-subtitle", state["subtitle"], NOTE_FONT, "normal", "#222"),
            ("bvl-note", state["note"], NOTE_FONT, "normal", "#555")]
    return [row for row in rows if row[1]]


def saliency_svg(state: dict[str, Any]) -> str:
    """A saliency view's synced state as a standalone SVG document: title, target, tokens coloured by their score
    (each with its exact score as a tooltip), A / B labels and the colour bar; or the error when there is one."""
    box = state["geometry"] or {"total_w": 480, "total_h": 80}
    width, height = box["total_w"], box["total_h"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bvl-saliency" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="{FONT}">'
             '<rect width="100%" height="100%" fill="#fff"/>']
    y = 8
    for css, text, size, weight, color in _header(state):
        y += 20
        parts.append(f'<text class="{css}" x="{MARGIN}" y="{y - 6}" font-size="{size}" font-family="sans-serif" '
                     f'font-weight="{weight}" fill="{color}">{escape(text)}</text>')
    if state["status"] == "error":
        parts.append(f'<text class="bvl-error" x="{MARGIN}" y="{y + 20}" font-size="{NOTE_FONT}" '
                     f'font-family="sans-serif" fill="#d62728">{escape(state["message"])}</text></svg>')
        return "".join(parts)
    scores = np.frombuffer(bytes(state["scores"]), dtype=np.float32)
    parts.append('<g class="bvl-tokens">')
    for index, (x, top, w) in enumerate(state["boxes"]):
        token, label = state["tokens"][index], state["labels"][index]
        dash = ' stroke-dasharray="3,2"' if state["special"][index] else ""
        parts.append(f'<g class="bvl-token" data-position="{state["positions"][index]}">'
                     f'<title>{state["positions"][index]} · {escape(token)}: '
                     f'{score_text(float(scores[index]))}</title>'
                     f'<rect x="{x:g}" y="{top:g}" width="{w:g}" height="{BOX_H}" rx="3" '
                     f'fill="{state["colors"][index]}" stroke="#9aa0a6" stroke-width="0.6"{dash}/>'
                     f'<text x="{x + PAD_X:g}" y="{top + BOX_H / 2 + FONT * 0.35:.1f}" '
                     f'fill="{state["ink"][index]}">{escape(label)}</text></g>')
    parts.append("</g>")
    for top, text in state["gutter"]:
        parts.append(f'<text class="bvl-segment" x="{MARGIN}" y="{top + BOX_H / 2 + FONT * 0.35:.1f}" '
                     f'font-family="sans-serif" font-weight="bold" fill="#666">{escape(text)}</text>')
    parts.append(colorbar_svg(box, state["bar_ticks"], state["bar_title"]))
    parts.append("</svg>")
    return "".join(parts)


def colorbar_svg(box: dict[str, Any], ticks: list[list[Any]], title: str) -> str:
    """A horizontal colour bar, negative (blue) on the left, zero in the middle, with its ticks and title."""
    x, y, w, h = box["bar_x"], box["bar_y"], box["bar_w"], box["bar_h"]
    bands = 64  # stacked bands rather than a gradient: no element ids to clash between figures on one page
    parts = [f'<g class="bvl-colorbar"><text class="bvl-colorbar-title" x="{MARGIN}" y="{box["bar_title_y"]}" '
             f'font-size="{NOTE_FONT}" font-family="sans-serif" fill="#333">{escape(title)}</text>'
             '<g shape-rendering="crispEdges">']
    for band in range(bands):
        code = round(band * (CODES - 1) / (bands - 1))
        x0 = x + w * band / bands
        parts.append(f'<rect x="{x0:.2f}" y="{y}" width="{w / bands + 0.3:.2f}" height="{h}" '
                     f'fill="{hex_color(code)}"/>')
    parts.append(f'</g><rect x="{x}" y="{y}" width="{w}" height="{h}" fill="none" stroke="#888" stroke-width="0.5"/>')
    for position, label in ticks:
        tx = x + w * position
        parts.append(f'<line x1="{tx:.1f}" y1="{y + h}" x2="{tx:.1f}" y2="{y + h + 4}" stroke="#555"/>'
                     f'<text class="bvl-colorbar-tick" x="{tx:.1f}" y="{y + h + 16}" text-anchor="middle" '
                     f'font-size="11">{escape(label)}</text>')
    parts.append("</g>")
    return "".join(parts)


class SaliencyView(anywidget.AnyWidget):
    """The tokens of a text coloured by their saliency scores (exact float32 scores, colours and positions synced),
    with the title, target, colour bar, a computing state and errors; hover shows a token's exact score."""

    _esm = esm("saliency_view.js")
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # the tokens, whole (hover, tooltips)
    labels = traitlets.List(traitlets.Unicode()).tag(sync=True)  # what each box shows (long tokens cut)
    positions = traitlets.List(traitlets.Int()).tag(sync=True)  # each token's position in the input
    special = traitlets.List(traitlets.Bool()).tag(sync=True)  # [CLS] / [SEP] (drawn with a dashed outline)
    scores = traitlets.Bytes(b"").tag(sync=True)  # float32 (T,): the scores saliency() returned
    colors = traitlets.List(traitlets.Unicode()).tag(sync=True)  # each box's fill
    ink = traitlets.List(traitlets.Unicode()).tag(sync=True)  # each box's text colour
    boxes = traitlets.List().tag(sync=True)  # [x, y, width] per token
    gutter = traitlets.List().tag(sync=True)  # [y, "A" | "B"]: where each sentence of a pair starts
    limit = traitlets.Float(0.0).tag(sync=True)  # the colour scale runs from -limit (blue) to +limit (red)
    palette = traitlets.Bytes(PALETTE.tobytes()).tag(sync=True)  # (255, 3) uint8, code 127 = zero
    bar_ticks = traitlets.List().tag(sync=True)  # [position 0..1 from the left, score as text]
    bar_title = traitlets.Unicode("").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    subtitle = traitlets.Unicode("").tag(sync=True)  # the target
    note = traitlets.Unicode("").tag(sync=True)
    geometry = traitlets.Dict().tag(sync=True)  # saliency_layout(): the same pixel positions as the SVG
    status = traitlets.Unicode("ready").tag(sync=True)  # ready | computing | error
    message = traitlets.Unicode("").tag(sync=True)  # the error, or what is being computed

    def state(self) -> dict[str, Any]:
        """The synced state the figure is drawn from."""
        return {name: getattr(self, name) for name in (
            "tokens", "labels", "positions", "special", "scores", "colors", "ink", "boxes", "gutter", "limit",
            "bar_ticks", "bar_title", "title", "subtitle", "note", "geometry", "status", "message")}

    def to_svg(self) -> str:
        """The figure as a standalone SVG document, drawn from the synced state."""
        return saliency_svg(self.state())

    def values(self) -> np.ndarray:
        """The scores the view holds, float32 (T,)."""
        return np.frombuffer(bytes(self.scores), dtype=np.float32).copy()

    def show(self, tokens: list[str], positions: list[int], segments: list[int], special: list[bool],
             scores: np.ndarray, title: str, subtitle: str, note: str) -> None:
        """Send one figure in one message: the front end never draws half-updated state."""
        scores = np.asarray(scores, dtype=np.float32)
        finite = np.abs(scores[np.isfinite(scores)])
        limit = float(finite.max()) if finite.size else 0.0
        codes = [color_code(float(s), limit) for s in scores]
        ticks = colorbar_ticks(limit)
        bar_title = "token score: red raises the target, blue lowers it (0 = white)"
        labels = [short_token(t) for t in tokens]
        boxes, gutter, geometry = saliency_layout(labels, list(segments), title, subtitle, note, ticks, bar_title)
        with self.hold_sync():
            self.tokens, self.labels, self.positions = list(tokens), labels, [int(p) for p in positions]
            self.special = [bool(s) for s in special]
            self.scores = scores.tobytes()
            self.colors = [hex_color(c) for c in codes]
            self.ink = ["#fff" if abs(c - CODES // 2) > 0.62 * (CODES // 2) else "#111" for c in codes]
            self.boxes, self.gutter, self.limit = boxes, gutter, limit
            self.bar_ticks, self.bar_title = ticks, bar_title
            self.title, self.subtitle, self.note = title, subtitle, note
            self.geometry = geometry
            self.status, self.message = "ready", ""

    def show_error(self, title: str, subtitle: str, message: str) -> None:
        """Show why there is no figure, in place of the tokens."""
        width = math.ceil(max(_text_w(title, TITLE_FONT), _text_w(subtitle, NOTE_FONT),
                              _text_w(message, NOTE_FONT)) * 1.05 + 2 * MARGIN)
        lines = sum(1 for line in (title, subtitle) if line)
        with self.hold_sync():
            self.tokens, self.labels, self.positions, self.special = [], [], [], []
            self.scores, self.colors, self.ink, self.boxes, self.gutter = b"", [], [], [], []
            self.limit, self.bar_ticks = 0.0, []
            self.title, self.subtitle, self.note = title, subtitle, ""
            self.geometry = {"total_w": max(width, 320), "total_h": 8 + 20 * lines + 36}
            self.status, self.message = "error", message


# the panel -------------------------------------------------------------------------------------------------------
def _forward(model: torch.nn.Module, inputs: Mapping[str, torch.Tensor]) -> Any:
    with evaluating(model), torch.inference_mode():
        return model(**inputs)


def _custom_choice(target: Any) -> TargetChoice:
    """A target the user passed that the toolbar does not offer (a callable, or a shorthand of other indices)."""
    if callable(target):
        what = f"custom function {getattr(target, '__name__', type(target).__name__)}"
    else:
        what = repr(target)
    return TargetChoice("custom", f"custom: {what}", what, target)


def _labelled(text: str, control: widgets.Widget) -> widgets.HBox:
    return widgets.HBox([widgets.Label(text), control], layout=widgets.Layout(align_items="center", width="auto"))


@dataclasses.dataclass(frozen=True)
class _Job:
    """One saliency computation the panel asked for, what it is kept under, and the figure's text for it."""

    key: tuple
    encoding: Mapping[str, torch.Tensor]
    target: Any
    method: str
    steps: int
    baseline: str
    title: str
    subtitle: str
    note: str
    export_name: str


class SaliencyPanel(Panel):
    """A text's tokens coloured by how much each moves a chosen output, with a toolbar for the target, the method
    (gradient × input or integrated gradients), the baseline and the steps, and an export button.

    Scores are computed once per text, target, method, baseline and steps (and kept); changes made in the toolbar
    compute in the background with the view showing "computing…", so the notebook stays usable meanwhile.
    Problems (a target the text or model cannot give, a text the model cannot read) are shown in the panel.
    """

    def __init__(self, model: torch.nn.Module | str | None = None, tokenizer: Any = None, text: str | None = None,
                 text_b: str | None = None, *, target: Any = None, method: str = "integrated_gradients",
                 steps: int = 64, baseline: str = "pad") -> None:
        check_choice("method", method, METHODS)
        check_choice("baseline", baseline, BASELINES)
        check_count("steps", steps)
        if steps > MAX_STEPS:
            raise ValueError(f"steps must be at most {MAX_STEPS}, got {steps}.")
        from bertviz_lab.widgets.workbench import model_and_tokenizer

        self.model, self.tokenizer = model_and_tokenizer(model, tokenizer)
        self.background = True  # toolbar changes compute on a worker thread
        self._asked: Any = target  # what the user asked for: a toolbar key, a shorthand or a callable
        self._choices: dict[str, TargetChoice] = {}
        self._default, self._default_note, self._unavailable = "", "", ""
        self._cache: collections.OrderedDict[tuple, np.ndarray] = collections.OrderedDict()
        self._lock = threading.RLock()  # the figure's state: the notebook and the worker both draw
        self._wanted: tuple | None = None
        self._shown: tuple | None = None
        self._pending: _Job | None = None
        self._worker: threading.Thread | None = None
        self._quiet = False
        self.encoded: EncodedText | None = None
        self.truncation: Truncation | None = None
        self.text, self.text_b = "", None
        self.target_choice = widgets.Dropdown(options=[], layout=widgets.Layout(width="auto", max_width="420px"))
        self.unit = widgets.BoundedIntText(value=0, min=0, max=max(0, self._hidden_size() - 1),
                                           layout=widgets.Layout(width="80px"))
        self.unit_box = _labelled("unit", self.unit)
        self.method = widgets.ToggleButtons(
            options=[("gradient × input", "gradient_x_input"), ("integrated gradients", "integrated_gradients")],
            value=method, style={"button_width": "auto"},
            tooltips=["gradient times input: one backward pass", "integrated gradients from the baseline to the text"])
        self.baseline = widgets.ToggleButtons(
            options=[("[PAD]", "pad"), ("[MASK]", "mask")], value=baseline, style={"button_width": "auto"},
            tooltips=["every word replaced by [PAD]", "every word replaced by [MASK]"])
        self.steps = widgets.BoundedIntText(value=steps, min=1, max=MAX_STEPS, layout=widgets.Layout(width="80px"))
        self.export_bar = ExportBar(self, "saliency")
        self.toolbar = widgets.HBox(
            [_labelled("target", self.target_choice), self.unit_box, _labelled("method", self.method),
             _labelled("baseline", self.baseline), _labelled("steps", self.steps), self.export_bar],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center", grid_gap="4px 16px"))
        self.toolbar.add_class("bvl-saliency-toolbar")
        self.truncation_notice = widgets.HTML()
        self.message = widgets.HTML()
        self.view = SaliencyView()
        super().__init__([self.toolbar, self.truncation_notice, self.message, self.view])
        if text is None:
            text = DEFAULT_MASKED_TEXT if self._predicts_masks() else DEFAULT_TEXT
        self.set_text(text, text_b)
        self.target_choice.observe(self._target_picked, names="value")
        for control in (self.unit, self.method, self.baseline, self.steps):
            control.observe(self._control_changed, names="value")

    # what is shown -------------------------------------------------------------------------------------------
    @property
    def choice(self) -> TargetChoice | None:
        """The target chosen in the toolbar (None while none fits)."""
        return self._choices.get(self.target_choice.value)

    @property
    def target(self) -> Any:
        """What saliency() receives for the chosen target: a shorthand or a callable (None while none fits)."""
        choice = self.choice
        if choice is None:
            return None
        return HiddenUnit(int(self.unit.value)) if choice.unit else choice.target

    @property
    def tokens(self) -> list[str]:
        """The tokens on screen, as the model reads them."""
        return list(self.view.tokens)

    @property
    def scores(self) -> np.ndarray:
        """The scores on screen, float32, one per token."""
        return self.view.values()

    def options(self) -> list[tuple[str, str]]:
        """(label, key) of every target the toolbar offers."""
        return list(self.target_choice.options)

    # text ----------------------------------------------------------------------------------------------------
    def set_text(self, text: str, text_b: str | None = None) -> None:
        """Score a new text (pair); a text the model cannot read is shown as an error in the panel."""
        try:
            encoded = encode_text(self.model, self.tokenizer, text, text_b)
            self._load(text, text_b, encoded, _forward(self.model, encoded.inputs))
        except Exception as error:  # shown in the panel, like every other problem of this view
            self.text, self.text_b = text if isinstance(text, str) else "", text_b or None
            title, subtitle, _ = self._header()
            self._show_error(f"{type(error).__name__}: {error}", title, subtitle)
            return
        self._update(background=False)

    def show_run(self, run: TextRun) -> None:
        """Score the text of a forward already run (a Workbench's): its batch and predictions are reused; only the
        backward passes saliency needs run here."""
        self.model, self.tokenizer = run.model, run.tokenizer
        self._quiet = True
        try:
            self.unit.max = max(0, self._hidden_size() - 1)
        finally:
            self._quiet = False
        self._load(run.text, run.text_b, run.encoded, run.output)
        self._update(background=False)

    def rerun(self, *_: Any) -> None:
        """Compute again (e.g. after training changed the weights), forgetting every kept score."""
        with self._lock:
            self._cache.clear()
            self._shown = None
        self.set_text(self.text, self.text_b)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the computation the toolbar started; True when none is running any more."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
        worker = self._worker
        return worker is None or not worker.is_alive()

    def _hidden_size(self) -> int:
        return int(getattr(getattr(self.model, "config", None), "hidden_size", 1) or 1)

    def _predicts_masks(self) -> bool:
        from bertviz_lab.widgets.masking_preview import predicts_masked_tokens

        return predicts_masked_tokens(self.model)

    def _load(self, text: str, text_b: str | None, encoded: EncodedText, output: Any) -> None:
        """Take a text's batch, work out the targets that fit, and choose the one asked for (or the default)."""
        choices, default, note = target_choices(self.model, self.tokenizer, encoded.encoding, output)
        with self._lock:
            self._wanted = None  # a result still computing for the previous text is not drawn
            self.text, self.text_b, self.encoded, self.truncation = text, text_b or None, encoded, encoded.truncation
            self._default, self._default_note = default, note
            self.truncation_notice.value = notice_html(self.truncation)
            key, self._unavailable = self._resolve(self._asked, choices)
            if key == "custom":
                choices = [*choices, _custom_choice(self._asked)]
            self._choices = {c.key: c for c in choices}
            options = [(c.label, c.key) for c in choices]
            if self._unavailable:
                options.append(("(no target fits)", "unavailable"))
                key = "unavailable"
            self._quiet = True
            try:
                self.target_choice.options = options
                self.target_choice.value = key if options else None
            finally:
                self._quiet = False

    def _resolve(self, asked: Any, choices: list[TargetChoice]) -> tuple[str, str]:
        """(toolbar key, "" or why the asked target does not fit) for what the user asked for.

        None: the default; a toolbar key; "mlm" (the top prediction at the first [MASK]), "nsp", "class" (the
        predicted one); a shorthand tuple or a callable (offered as "custom" unless the toolbar has it).
        """
        keys = [c.key for c in choices]
        model = type(self.model).__name__
        if asked is None:
            return (self._default, "") if self._default else ("", "no target fits this model and text.")
        if isinstance(asked, str) and asked in keys:
            return asked, ""
        if asked == "mlm":
            key = next((c.key for c in choices if c.key.startswith("mlm:") and "[MASK]" in c.title), "")
            if key:
                return key, ""
            if any(k.startswith("mlm:") for k in keys) or self._predicts_masks():
                return "", ("target 'mlm' scores the top prediction at the first [MASK], but the text has no [MASK]; "
                            "put [MASK] in the text or choose another target.")
            return "", f"target 'mlm' needs a masked-LM head, which {model} does not have; choose another target."
        if asked == "nsp":
            return "", f"target 'nsp' needs a next-sentence head, which {model} does not have; choose another target."
        if asked == "class":
            key = next((c.key for c in choices if c.key.startswith("class:") and "predicted" in c.label), "")
            key = key or next((k for k in keys if k.startswith("class:")), "")
            return (key, "") if key else ("", f"target 'class' needs a sequence-classification head, which {model} "
                                               "does not have; choose another target.")
        if isinstance(asked, str):
            return "", f"target {asked!r} is not offered for this model and text; choose a target in the toolbar."
        key = next((c.key for c in choices if not c.unit and isinstance(asked, tuple) and c.target == asked), "")
        return key or "custom", ""

    # computing -----------------------------------------------------------------------------------------------
    def _target_picked(self, change: dict) -> None:
        if self._quiet or change["new"] in (None, "unavailable"):
            return
        self._asked = change["new"] if change["new"] != "custom" else self._choices["custom"].target
        if self._unavailable:  # the placeholder goes once a target that fits is chosen
            self._unavailable = ""
            self.target_choice.options = [o for o in self.target_choice.options if o[1] != "unavailable"]
        self._update(background=self.background)

    def _control_changed(self, _: Any) -> None:
        if not self._quiet:
            self._update(background=self.background)

    def _header(self) -> tuple[str, str, str]:
        """The figure's title (method, baseline, steps), its target line and its note, from the toolbar."""
        method = self.method.value
        if method == "integrated_gradients":
            title = (f"Saliency · {METHOD_NAMES[method]} · {BASELINE_NAMES[self.baseline.value]} baseline · "
                     f"{self.steps.value} steps")
        else:
            title = f"Saliency · {METHOD_NAMES[method]} (no baseline, no steps)"
        choice = self.choice
        if choice is None:
            what = "none"
        elif choice.unit:
            what = f"unit {int(self.unit.value)} of the last layer's [CLS] vector"
        else:
            what = choice.title
        notes = [self._default_note] if self._default_note and choice is not None and choice.key == self._default \
            else []
        if self.truncation is not None and self.truncation.cut:
            notes.append(self.truncation.notice)
        return title, f"target: {what}", "; ".join(notes)

    def _job(self) -> _Job | None:
        choice = self.choice
        if choice is None or self.encoded is None:
            return None
        method, steps, baseline = self.method.value, int(self.steps.value), self.baseline.value
        what = f"cls-unit:{int(self.unit.value)}" if choice.unit else choice.key
        if choice.key == "custom":
            what = f"custom:{id(choice.target)}"
        integrated = method == "integrated_gradients"
        key = (id(self.model), self.text, self.text_b, what, method, baseline if integrated else None,
               steps if integrated else None)
        slug = "".join(ch if ch.isalnum() else "-" for ch in what).strip("-")
        return _Job(key, self.encoded.encoding, self.target, method, steps, baseline, *self._header(),
                    f"saliency-{method.replace('_', '-')}-{slug}")

    def _update(self, background: bool) -> None:
        """Show the scores for what the toolbar says: kept ones at once, else computed (in the background when
        asked from the toolbar)."""
        choice = self.choice
        self.unit_box.layout.display = None if (choice is not None and choice.unit) else "none"
        self.baseline.disabled = self.steps.disabled = self.method.value != "integrated_gradients"
        job = self._job()
        with self._lock:
            if self._unavailable or job is None:
                self._wanted = None
                title, subtitle, _ = self._header()
                self._show_error(self._unavailable or "no target fits this model and text.", title, subtitle)
                return
            self._wanted = job.key
            if job.key == self._shown and self.view.status == "ready":
                self._pending = None
                return
            kept = self._cache.get(job.key)
            if kept is not None:
                self._pending = None
                self._draw(job, kept)
                return
            self.view.status, self.view.message = "computing", "computing…"
            if background:
                self._pending = job
                if self._worker is None or not self._worker.is_alive():
                    self._worker = threading.Thread(target=self._work, name="bertviz-saliency", daemon=True)
                    self._worker.start()
                return
            self._pending = None
        self._run(job)

    def _run(self, job: _Job) -> None:
        """Compute one job and show its result, or its error, if it is still what the toolbar asks for."""
        try:
            scores = self._compute(job)
        except Exception as error:  # shown in the panel: a cell must not fail on a target that does not fit
            with self._lock:
                if self._wanted == job.key:
                    self._show_error(f"{type(error).__name__}: {error}", job.title, job.subtitle)
            return
        with self._lock:
            if self._wanted == job.key:
                self._draw(job, scores)

    def _compute(self, job: _Job) -> np.ndarray:
        with model_lock(self.model):  # no other panel's run on this model meanwhile (its trace would see ours)
            scores = saliency(self.model, job.encoding, job.target, method=job.method, steps=job.steps,
                              baseline=job.baseline, tokenizer=self.tokenizer)[0].numpy()
        with self._lock:
            self._cache[job.key] = scores
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return scores

    def _work(self) -> None:
        """The worker thread: compute the newest request until none is left."""
        while True:
            with self._lock:
                job, self._pending = self._pending, None
                if job is None:
                    self._worker = None
                    return
            self._run(job)

    def _draw(self, job: _Job, scores: np.ndarray) -> None:
        encoding = job.encoding
        ids = encoding["input_ids"][0].tolist()
        mask = encoding["attention_mask"][0].tolist() if "attention_mask" in encoding else [1] * len(ids)
        keep = [p for p, m in enumerate(mask) if m]
        types = encoding["token_type_ids"][0].tolist() if "token_type_ids" in encoding else [0] * len(ids)
        special = encoding["special_tokens_mask"][0].tolist() if "special_tokens_mask" in encoding else [0] * len(ids)
        tokens = self.tokenizer.convert_ids_to_tokens([ids[p] for p in keep])
        self.view.show(tokens, keep, [types[p] for p in keep], [bool(special[p]) for p in keep],
                       np.asarray(scores, dtype=np.float32)[keep], job.title, job.subtitle, job.note)
        self._shown = job.key
        self.message.value = ""
        self.export_bar.name = job.export_name
        self.figure_changed()

    def _show_error(self, message: str, title: str, subtitle: str) -> None:
        with self._lock:
            self.view.show_error(title, subtitle, message)
            self._shown = None
            self.message.value = f"<span class='bvl-saliency-error' style='color:#d62728'>{escape(message)}</span>"
        self.figure_changed()

    # figure --------------------------------------------------------------------------------------------------
    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document."""
        return self.view.to_svg()

    def static_html(self) -> str:
        """The figure on screen as self-contained HTML (its SVG; no scripts, no network)."""
        return f"<div class='bvl-figure bvl-saliency'>{self.to_svg()}</div>"
