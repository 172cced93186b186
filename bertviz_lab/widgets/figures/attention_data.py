"""What the attention views show, as plain arrays: one matrix, filtered tokens, thumbnails, top-k lines.

Kept apart from the widgets so the numbers can be tested without a browser, and so every view sends only
what is on screen: one (T, T) matrix and its colours for the heatmap, top-k lines per query for the head view, and
downsampled 8-bit thumbnails for the model view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from bertviz_lab.trace.attention import attention_rollout
from bertviz_lab.widgets.figures.palette import OVERFLOW_COLOR
from bertviz_lab.widgets.figures.text import minus

AGGREGATIONS = ("head", "mean", "rollout")
DIRECTIONS = ("all", "A→B", "B→A")
SPECIAL_TOKENS = ("[CLS]", "[SEP]")


@dataclass(frozen=True)
class TokenInfo:
    """The tokens of one example: text, whether each is padding, special, and which sentence it is in."""

    tokens: list[str]
    real: np.ndarray  # bool (T,): not padding
    special: np.ndarray  # bool (T,): [CLS] or [SEP]
    segment: np.ndarray  # int (T,): 0 = sentence A, 1 = sentence B

    @property
    def has_pair(self) -> bool:
        return bool((self.segment[self.real] == 1).any())


def token_info(tokens: Sequence[str], attention_mask: torch.Tensor | None,
               token_type_ids: torch.Tensor | None) -> TokenInfo:
    """Token facts for one row (tensors are 1-D or None)."""
    T = len(tokens)
    real = np.ones(T, dtype=bool) if attention_mask is None else attention_mask.cpu().numpy().astype(bool)[:T]
    segment = np.zeros(T, dtype=int) if token_type_ids is None else token_type_ids.cpu().numpy().astype(int)[:T]
    special = np.array([t in SPECIAL_TOKENS for t in tokens], dtype=bool)
    return TokenInfo(list(tokens), real, special, segment)


def select_positions(info: TokenInfo, hide_special: bool, direction: str) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the query rows and key columns to show (padding never shown)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}.")
    keep = info.real & ~info.special if hide_special else info.real.copy()
    queries, keys = keep.copy(), keep.copy()
    if direction != "all":
        if not info.has_pair:
            raise ValueError(f"direction {direction!r} needs a sentence pair; this input has one sentence.")
        source, target = (0, 1) if direction == "A→B" else (1, 0)
        queries &= info.segment == source
        keys &= info.segment == target
    return np.flatnonzero(queries), np.flatnonzero(keys)


def attention_matrix(attentions: Sequence[torch.Tensor], layer: int, head: int, aggregation: str, row: int = 0,
                     attention_mask: torch.Tensor | None = None) -> np.ndarray:
    """The (T, T) matrix to show: one head, the mean of a layer's heads, or the rollout up to the layer."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}.")
    if not 0 <= layer < len(attentions):
        raise ValueError(f"layer {layer} does not exist; the trace has layers 0..{len(attentions) - 1}.")
    attention = attentions[layer][row]  # (nh, T, S)
    if aggregation == "head":
        if not 0 <= head < attention.shape[0]:
            raise ValueError(f"head {head} does not exist; layer {layer} has heads 0..{attention.shape[0] - 1}.")
        return attention[head].float().numpy()
    if aggregation == "mean":
        return attention.float().mean(dim=0).numpy()
    mask = None if attention_mask is None else attention_mask[row: row + 1]
    layers = [a[row: row + 1] for a in attentions[: layer + 1]]
    return attention_rollout(layers, mask)[0].numpy()


# colours of the matrix on screen: 8-bit codes into one palette ---------------------------------------------
SCALES = ("linear", "row", "log")  # one colour scale for the matrix, each query row to its max, log10
SPECIAL_MODES = ("show", "clip", "hide")  # [CLS]/[SEP] in the colour scale, left out of it, or not shown
TOP_CODE = 254  # the top of the colour range; 255 marks a cell above it (a clipped [CLS]/[SEP] weight)
OVER_CODE = 255
DECADES = 4  # the log scale spans 10^-4 × max .. max


# ColorBrewer "Blues" (sequential, colour-blind safe, prints in grey), white at 0; one palette for every view
_BLUES = ("#ffffff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")


def _rgb(color: str) -> list[int]:
    return [int(color[i: i + 2], 16) for i in (1, 3, 5)]


def make_palette(stops: Sequence[str] = _BLUES, over: str | None = None) -> np.ndarray:
    """(256, 3) uint8 colours for codes 0..255: the stops interpolated over 0..254; code 255 the top colour, or
    `over` where a cell beyond the scale must not pass for its top."""
    rgb = np.array([_rgb(c) for c in stops], dtype=np.float64)
    at = np.minimum(np.arange(256), TOP_CODE) / TOP_CODE * (len(stops) - 1)
    palette = np.rint(np.stack([np.interp(at, np.arange(len(stops)), rgb[:, k]) for k in range(3)], axis=1)).astype(
        np.uint8)
    if over is not None:
        palette[OVER_CODE] = _rgb(over)
    return palette


PALETTE = make_palette()  # the model view's thumbnails: a pooled cell above the scale keeps the top colour
HEATMAP_PALETTE = make_palette(over=OVERFLOW_COLOR)  # the heatmap: a clipped cell in the overflow colour, marked


@dataclass(frozen=True)
class HeatmapCodes:
    """A matrix as 8-bit colour codes (the heatmap's cell colours) plus the weight each code stands for.

    linear: weight = code × scale.  row: weight = code × row_scales[row].  log: weight = floor × (top / floor) **
    (code / 254).  Cells above the colour range (clipped [CLS]/[SEP]) carry code 255, the top colour.
    """

    codes: np.ndarray  # uint8 (R, C)
    mode: str
    scale: float  # linear: weight of one code step
    row_scales: np.ndarray  # float32 (R,): per-row weight of one code step ("row"), else empty
    log_range: tuple[float, float]  # (floor, top): the weights of codes 0 and 254 ("log"), else (0, 0)


def _running_codes(levels: np.ndarray) -> np.ndarray:
    """Round each row so that every prefix sum stays within half a step: a row's decoded sum is off by <= 1/2 step.

    levels are in code steps (>= 0, <= 254); each code is off by less than one step, and as the running sum is
    monotonic no code is negative. `levels` (float64) is overwritten: this runs on every layer change.
    """
    rounded = np.rint(np.cumsum(levels, axis=1, out=levels), out=levels)
    codes = np.empty_like(rounded)
    codes[:, :1] = rounded[:, :1]
    np.subtract(rounded[:, 1:], rounded[:, :-1], out=codes[:, 1:])
    return codes.clip(0, OVER_CODE, out=codes).astype(np.uint8)


def encode_heatmap(matrix: np.ndarray, mode: str = "linear", ignore_rows: np.ndarray | None = None,
                   ignore_cols: np.ndarray | None = None) -> HeatmapCodes:
    """8-bit colour codes of the matrix on screen under a colour scale; ignored rows/columns ([CLS]/[SEP] when
    clipped) do not set the top of the scale, and their cells above it get code 255 (the top colour)."""
    if mode not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {mode!r}.")
    values = np.asarray(matrix, dtype=np.float64)
    R, C = values.shape
    ignore_r = np.zeros(R, bool) if ignore_rows is None else np.asarray(ignore_rows, bool)
    ignore_c = np.zeros(C, bool) if ignore_cols is None else np.asarray(ignore_cols, bool)
    empty = np.zeros(0, np.float32)
    if mode == "row":
        counted = np.where(np.broadcast_to(ignore_c, (R, C)), -np.inf, values)
        row_tops = counted.max(axis=1, initial=-np.inf) if C else np.zeros(R)
        row_tops = np.where(np.isfinite(row_tops), row_tops, values.max(axis=1, initial=0.0) if C else 0.0).clip(0)
        over = values > row_tops[:, None]
        row_steps = np.where(row_tops > 0, row_tops / TOP_CODE, 0.0)
        levels = np.where(over, 0.0, values) / np.where(row_steps > 0, row_steps, 1.0)[:, None]
        codes = _running_codes(levels)
        scale, row_scales, log_range = 0.0, row_steps.astype(np.float32), (0.0, 0.0)
    else:
        kept = values[np.ix_(~ignore_r, ~ignore_c)] if ignore_r.any() or ignore_c.any() else values
        top = float(kept.max()) if kept.size else -np.inf
        top = max(top if np.isfinite(top) else float(values.max(initial=0)), 0.0)
        over = values > top
        if mode == "linear":
            step = top / TOP_CODE if top > 0 else 0.0
            levels = np.divide(values, step or 1.0)
            levels[over] = 0.0
            codes = _running_codes(levels)
            scale, row_scales, log_range = step, empty, (0.0, 0.0)
        else:
            top = top if top > 0 else 1.0
            floor = top * 10.0 ** -DECADES
            position = np.log10(values.clip(floor, top) / floor) / DECADES
            codes = np.rint(position * TOP_CODE).astype(np.uint8)
            scale, row_scales, log_range = 0.0, empty, (floor, top)
    codes[over] = OVER_CODE
    return HeatmapCodes(codes, mode, float(scale), row_scales, (float(log_range[0]), float(log_range[1])))


def overflow_max(matrix: np.ndarray, encoded: HeatmapCodes) -> float | None:
    """The largest true value among the cells beyond the colour scale, in the colour bar's units (a weight; with the
    per-row scale, the weight ÷ its row's max); None when no cell is beyond it."""
    over = encoded.codes == OVER_CODE
    if not over.any():
        return None
    values = np.asarray(matrix, dtype=np.float64)
    if encoded.mode == "row":
        tops = encoded.row_scales.astype(np.float64) * TOP_CODE
        values = values / np.where(tops > 0, tops, np.inf)[:, None]
    return float(values[over].max())


def scale_top(encoded: HeatmapCodes) -> float | None:
    """The weight at the top of a single colour scale (linear or log), above which a cell is clipped; None for the
    per-row scale, whose top is each row's own."""
    if encoded.mode == "log":
        return encoded.log_range[1]
    return None if encoded.mode == "row" else encoded.scale * TOP_CODE


def _nice_step(span: float, count: int = 4) -> float:
    raw = span / count
    power = 10.0 ** np.floor(np.log10(raw))
    return float(next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw))


def colorbar_ticks(encoded: HeatmapCodes) -> tuple[list[tuple[float, str]], str]:
    """Ticks of the colour bar as (position 0..1 from the bottom, label in real weights) and the bar's title."""
    if encoded.mode == "log":
        floor, top = encoded.log_range
        ticks = [(float(np.log10(10.0 ** k / floor) / np.log10(top / floor)), f"{10.0 ** k:g}")
                 for k in range(int(np.ceil(np.log10(floor) - 1e-9)), int(np.floor(np.log10(top) + 1e-9)) + 1)]
        return ticks, "attention weight (log scale)"
    if encoded.mode == "row":
        return [(v, f"{v:g}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)], "attention weight ÷ its row's max"
    top = encoded.scale * TOP_CODE
    if top <= 0:
        return [(0.0, "0")], "attention weight"
    step = _nice_step(top)
    values = np.arange(0.0, top * (1 + 1e-9), step)
    return [(float(v / top), f"{round(float(v), 12):g}") for v in values], "attention weight"


def pooled_layers(maps: Iterable[torch.Tensor], size: int = 24, ignore_rows: np.ndarray | None = None,
                  ignore_cols: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Every layer's (H, Q, K) maps max-pooled to at most size rows × size columns (each cell the largest weight of
    its block, so one strong weight stays visible and the colour bar reaches the maps' true maximum), 8-bit under one
    shared scale; a cross attention's rectangle keeps query rows and key columns.

    `maps` is read once, a layer at a time (a generator keeps only one layer's (H, Q, K) floats at once).
    ignore_rows / ignore_cols: the rows and columns that do not set the shared scale (clipped [CLS]/[SEP]). Returns
    codes (L, H, rows, cols) with weight = code × scale and 255 above the scale, and scale.
    """
    ignoring = any(mask is not None and np.asarray(mask).any() for mask in (ignore_rows, ignore_cols))
    pooled, clipped = [], []
    for layer in maps:  # (H, Q, K)
        layer = layer.float()
        Q, K = layer.shape[-2:]
        shape = (max(1, min(size, Q)), max(1, min(size, K)))
        pooled.append(F.adaptive_max_pool2d(layer.unsqueeze(1), shape).squeeze(1))
        if ignoring:
            rows = torch.ones(Q) if ignore_rows is None else torch.as_tensor(~np.asarray(ignore_rows, bool)).float()
            cols = torch.ones(K) if ignore_cols is None else torch.as_tensor(~np.asarray(ignore_cols, bool)).float()
            counted = layer * rows[:, None] * cols[None, :]
            clipped.append(F.adaptive_max_pool2d(counted.unsqueeze(1), shape).squeeze(1))
    stacked = torch.stack(pooled).numpy()  # (L, H, rows, cols)
    top = float(torch.stack(clipped).max()) if clipped else float(stacked.max(initial=0.0))
    scale = top / TOP_CODE if top > 0 else 0.0
    codes = np.rint(stacked / (scale or 1.0)).clip(0, TOP_CODE).astype(np.uint8)
    codes[stacked > top * (1 + 1e-6)] = OVER_CODE
    return codes, scale


def pooled_thumbnails(attentions: Sequence[torch.Tensor], row: int, size: int = 24, keep: np.ndarray | None = None,
                      ignore: np.ndarray | None = None) -> tuple[np.ndarray, int, float]:
    """Every layer × head map of one example (of a batch's (B, H, T, T) maps), pooled as `pooled_layers` does over
    the token positions `keep` (padding and hidden [CLS]/[SEP] left out); ignore: among those, the tokens whose rows
    and columns do not set the shared scale. Returns codes (L, H, s, s), s, and scale."""
    positions = torch.as_tensor(np.arange(attentions[0].shape[-1]) if keep is None else np.asarray(keep))
    layers = (attention[row].index_select(1, positions).index_select(2, positions) for attention in attentions)
    codes, scale = pooled_layers(layers, size, ignore, ignore)
    return codes, codes.shape[2], scale


def pooled_maps(maps: Sequence[torch.Tensor], size: int = 24) -> tuple[np.ndarray, float]:
    """Every layer's (H, Q, K) maps pooled as `pooled_layers` does, nothing left out of the scale."""
    return pooled_layers(maps, size)


# neuron view: one query against every shown key, inside one head --------------------------------------------
# ColorBrewer "RdBu" reversed (diverging, colour-blind safe): blue below zero, white at zero, red above
_RDBU = ("#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d", "#b2182b")
DIVERGING = make_palette(_RDBU)
ZERO_CODE = TOP_CODE // 2  # the diverging palette's white: code 127 is zero, 0 is -top, 254 is +top


@dataclass(frozen=True)
class NeuronRows:
    """What the neuron view shows for one query of one head: q, each shown key k_j, q ⊙ k_j, q·k_j/√d, softmax."""

    q: np.ndarray  # float32 (hs,)
    k: np.ndarray  # float32 (n, hs): the shown keys' vectors
    products: np.ndarray  # float32 (n, hs): q ⊙ k_j
    scores: np.ndarray  # float32 (n,): q·k_j / √hs
    weights: np.ndarray  # float32 (n,): softmax over every real key, then the shown ones picked

    def keys(self, shown: slice) -> "NeuronRows":
        """The same query against the keys in `shown` only (a window of a long text)."""
        return NeuronRows(self.q, self.k[shown], self.products[shown], self.scores[shown], self.weights[shown])


def neuron_rows(q: torch.Tensor, k: torch.Tensor, head: int, query: int, keys: np.ndarray,
                real: np.ndarray | None = None) -> NeuronRows:
    """q (nh, T, hs) and k (nh, S, hs) of one example -> the rows of one query; the softmax runs over the real
    (non-padding) keys as the model's did, so hiding some keys does not change the weights of the others."""
    if not 0 <= head < q.shape[0]:
        raise ValueError(f"head {head} does not exist; this layer has heads 0..{q.shape[0] - 1}.")
    if not 0 <= query < q.shape[1]:
        raise ValueError(f"query token {query} does not exist; the input has positions 0..{q.shape[1] - 1}.")
    q_vec = q[head, query].double()  # (hs,)
    k_all = k[head].double()  # (S, hs)
    scores = (k_all @ q_vec) / np.sqrt(q_vec.shape[0])  # (S,)
    if real is not None:
        scores = scores.masked_fill(~torch.as_tensor(np.asarray(real, bool)), float("-inf"))
    weights = torch.softmax(scores, dim=0)
    key_index = torch.as_tensor(np.asarray(keys, dtype=np.int64))
    shown_k = k_all.index_select(0, key_index)
    return NeuronRows(q_vec.float().numpy(), shown_k.float().numpy(), (shown_k * q_vec).float().numpy(),
                      scores.index_select(0, key_index).float().numpy(),
                      weights.index_select(0, key_index).float().numpy())


def symmetric_top(*arrays: np.ndarray) -> float:
    """The largest |value| of the arrays: the top of a diverging colour scale centred at zero (1.0 when all zero)."""
    top = max((float(np.abs(a).max()) for a in arrays if np.size(a)), default=0.0)
    return top if top > 0 and np.isfinite(top) else 1.0


def diverging_codes(values: np.ndarray, top: float) -> np.ndarray:
    """uint8 codes of a diverging scale: 127 at zero, 0 at -top, 254 at +top (values beyond are clipped); halves
    round up, as the browser's Math.round does."""
    steps = np.floor(np.asarray(values, dtype=np.float64) / top * ZERO_CODE + 0.5)
    return (steps.clip(-ZERO_CODE, ZERO_CODE) + ZERO_CODE).astype(np.uint8)


def diverging_ticks(top: float) -> list[tuple[float, str]]:
    """Colour bar ticks of a scale from -top to +top: (position 0..1 from the bottom, value as text), 0 included."""
    step = _nice_step(top, 3)
    count = int(np.floor(top / step + 1e-9))
    values = [i * step for i in range(-count, count + 1)]
    return [(float((v / top + 1) / 2), minus(f"{round(v, 12):g}")) for v in values]


# head ablation: how much each head's attention moved ------------------------------------------------------
def attention_change(before: Sequence[torch.Tensor], after: Sequence[torch.Tensor], row: int,
                     keep: np.ndarray) -> np.ndarray:
    """(L, H) mean over the kept query rows of half the L1 distance between a head's attention rows before and after
    (0: the same, 1: disjoint), over the kept keys."""
    positions = torch.as_tensor(np.asarray(keep, dtype=np.int64))
    changes = []
    for old, new in zip(before, after):
        a = old[row].index_select(1, positions).index_select(2, positions).double()
        b = new[row].index_select(1, positions).index_select(2, positions).double()
        changes.append(0.5 * (a - b).abs().sum(-1).mean(-1) if len(positions) else torch.zeros(a.shape[0]))
    return torch.stack(changes).numpy()


def pooled_differences(before: Sequence[torch.Tensor], after: Sequence[torch.Tensor], row: int, size: int = 24,
                       keep: np.ndarray | None = None) -> tuple[np.ndarray, int, float]:
    """after − before of every layer × head map, average-pooled to at most size × size, as diverging codes.

    Returns codes (L, H, s, s) with change = (code − 127) × scale, s, and scale (one step).
    """
    positions = torch.as_tensor(np.arange(before[0].shape[-1]) if keep is None else np.asarray(keep))
    s = max(1, min(size, len(positions)))
    pooled = []
    for old, new in zip(before, after):
        diff = (new[row].float() - old[row].float()).index_select(1, positions).index_select(2, positions)
        pooled.append(F.adaptive_avg_pool2d(diff.unsqueeze(1), s).squeeze(1))
    stacked = torch.stack(pooled).numpy()
    top = symmetric_top(stacked)
    return diverging_codes(stacked, top), s, top / ZERO_CODE
