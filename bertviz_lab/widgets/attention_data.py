"""What the attention views show, as plain arrays: one matrix, filtered tokens, thumbnails, top-k lines.

Kept apart from the widgets so the numbers can be tested without a browser, and so every view sends only
what is on screen: one (T, T) matrix for the heatmap, top-k lines per query for the head view, and
downsampled 8-bit thumbnails for the model view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from bertviz_lab.trace.attention import attention_rollout

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


def token_info(tokens: Sequence[str], attention_mask: torch.Tensor | None, token_type_ids: torch.Tensor | None) -> TokenInfo:
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


def quantize(matrix: np.ndarray) -> tuple[np.ndarray, float]:
    """8-bit copy scaled to the matrix maximum, and that maximum (value ≈ q / 255 * maximum)."""
    top = float(matrix.max()) if matrix.size else 0.0
    if top <= 0:
        return np.zeros(matrix.shape, dtype=np.uint8), 0.0
    return np.rint(matrix / top * 255).clip(0, 255).astype(np.uint8), top


def thumbnails(attentions: Sequence[torch.Tensor], row: int, size: int = 24,
               real: np.ndarray | None = None) -> tuple[bytes, int]:
    """Every layer × head map of one example, average-pooled to at most size × size, 8-bit, each scaled to its max.

    Returns (buffer of L*H*s*s bytes in layer, head, query, key order, s).
    """
    keep = torch.as_tensor(np.flatnonzero(real)) if real is not None else None
    maps = torch.stack([a[row] if keep is None else a[row][:, keep][:, :, keep] for a in attentions]).float()
    L, H, T, S = maps.shape
    s = min(size, T, S)
    pooled = F.adaptive_avg_pool2d(maps.reshape(L * H, 1, T, S), s).reshape(L, H, s, s)
    top = pooled.amax(dim=(-1, -2), keepdim=True).clamp_min(1e-12)
    return (pooled / top * 255).round().clamp(0, 255).to(torch.uint8).numpy().tobytes(), s


def top_lines(matrix: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """For each query row, the k strongest keys: (indices uint16 (Q, k), weights uint8 (Q, k), 255 = probability 1)."""
    k = max(1, min(k, matrix.shape[1]))
    index = np.argpartition(-matrix, k - 1, axis=1)[:, :k] if matrix.shape[1] > k else np.tile(
        np.arange(matrix.shape[1]), (matrix.shape[0], 1))
    weights = np.take_along_axis(matrix, index, axis=1)
    return index.astype(np.uint16), np.rint(weights.clip(0, 1) * 255).astype(np.uint8)
