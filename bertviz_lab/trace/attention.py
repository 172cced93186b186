"""Attention aggregations for panels: head means, attention rollout, head entropy, [CLS]/[SEP]/self shares.

Every function takes (B, nh, T, S) probabilities (one layer) or a Trace / list of them (all layers), and an
optional attention mask (B, S) with 1 = token, 0 = padding; padded queries and keys are left out of every result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from bertviz_lab import kernels
from bertviz_lab.kernels.head_statistics import STATISTIC_NAMES

# the statistics a single trace's maps give: the registry's first four (entropy, cls, sep, self), by its names
ENTROPY, CLS, SEP, SELF = STATISTIC_NAMES[:4]

if TYPE_CHECKING:
    from bertviz_lab.trace.hooks import Trace

def _check_attention(attention: torch.Tensor, name: str = "attention") -> torch.Tensor:
    if not isinstance(attention, torch.Tensor):
        raise TypeError(f"{name} must be a (batch, heads, query, key) tensor, got {type(attention).__name__}.")
    if attention.dim() != 4:
        raise ValueError(f"{name} must be 4D (batch, heads, query, key), got shape {tuple(attention.shape)}.")
    return attention.detach().to("cpu", torch.float64)


def _layers(source: "Trace | Sequence[torch.Tensor]") -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """The attention tensors of a Trace (with its mask) or of a list."""
    from bertviz_lab.trace.hooks import Trace

    if isinstance(source, Trace):
        if not source.attentions:
            raise ValueError("the trace holds no attentions: run the model inside trace(model, attentions=True).")
        return source.attentions, source.attention_mask
    if isinstance(source, torch.Tensor) or not isinstance(source, Sequence) or not source:
        raise TypeError(f"expected a Trace or a non-empty list of (batch, heads, query, key) tensors, "
                        f"got {type(source).__name__}.")
    return list(source), None


def key_mask(attention_mask: torch.Tensor | None, batch: int, key_len: int) -> torch.Tensor:
    """(B, S) booleans, True at real tokens: from a 0/1 or boolean (B, S) mask, all True when None."""
    if attention_mask is None:
        return torch.ones(batch, key_len, dtype=torch.bool)
    mask = attention_mask.detach().cpu()
    if mask.dim() != 2 or mask.shape[1] != key_len or mask.shape[0] not in (1, batch):
        raise ValueError(f"attention_mask must be (batch={batch}, key_len={key_len}) with 1 = token, "
                         f"got shape {tuple(mask.shape)}.")
    return (mask != 0 if mask.dtype != torch.bool else mask).expand(batch, key_len)


def _query_mask(keys: torch.Tensor, query_len: int) -> torch.Tensor:
    """Queries are the last T keys (the rest is a cache of earlier positions)."""
    return keys[:, keys.shape[1] - query_len:]


def head_mean(attention: torch.Tensor) -> torch.Tensor:
    """(B, nh, T, S) -> (B, T, S): the layer's attention averaged over heads."""
    return _check_attention(attention).mean(dim=1).float()


def layer_means(source: "Trace | Sequence[torch.Tensor]") -> list[torch.Tensor]:
    """Head mean of every layer, (B, T, S) each."""
    return [head_mean(a) for a in _layers(source)[0]]


def attention_rollout(source: "Trace | Sequence[torch.Tensor]", attention_mask: torch.Tensor | None = None, *,
                      residual_weight: float = 0.5) -> torch.Tensor:
    """Abnar & Zuidema (2020) rollout through the given layers: (B, T, T), rows sum to 1 over real tokens.

    Each layer's head mean A becomes residual_weight * I + (1 - residual_weight) * A, restricted to real tokens
    and row-normalised; the rollout is the product A_L ... A_2 A_1. Rows of padded queries are all zero.
    """
    layers, trace_mask = _layers(source)
    if not 0.0 <= residual_weight <= 1.0:
        raise ValueError(f"residual_weight must lie in [0, 1], got {residual_weight!r}.")
    mask = trace_mask if attention_mask is None else attention_mask
    rollout = None
    for i, attention in enumerate(layers):
        a = _check_attention(attention, f"attentions[{i}]").mean(dim=1)  # (B, T, S)
        B, T, S = a.shape
        if T != S:
            raise ValueError(f"attention rollout needs square self-attention maps, layer {i} is {T}x{S} "
                             f"(a cached or cross-attention pass).")
        valid = key_mask(mask, B, S).to(a.dtype)
        a = residual_weight * torch.eye(T, dtype=a.dtype) + (1.0 - residual_weight) * a
        a = a * valid[:, :, None] * valid[:, None, :]
        a = a / a.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)
        rollout = a if rollout is None else a @ rollout
    assert rollout is not None  # _layers refuses an empty list of layers
    return rollout.float()


def head_entropy(attention: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """(B, nh): mean over real queries of the entropy (nats) of each head's distribution over real keys."""
    p = _check_attention(attention)
    B, _, T, S = p.shape
    keys = key_mask(attention_mask, B, S)
    queries = _query_mask(keys, T).to(p.dtype)  # (B, T)
    p = p * keys[:, None, None, :].to(p.dtype)
    per_query = kernels.entropy(p)  # (B, nh, T)
    return ((per_query * queries[:, None, :]).sum(-1) / queries.sum(-1, keepdim=True).clamp_min(1)).float()


def special_token_masks(input_ids: torch.Tensor | None = None, tokens: Sequence[Sequence[str]] | None = None, *,
                        cls_token_id: int = 101, sep_token_id: int = 102, cls_token: str = "[CLS]",
                        sep_token: str = "[SEP]") -> tuple[torch.Tensor, torch.Tensor]:
    """(is_cls, is_sep) booleans (B, S) from token ids, or else from token strings."""
    if input_ids is not None:
        ids = input_ids.detach().cpu()
        if ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, seq_len), got shape {tuple(ids.shape)}.")
        return ids == cls_token_id, ids == sep_token_id
    if tokens is not None:
        return (torch.tensor([[t == cls_token for t in row] for row in tokens], dtype=torch.bool),
                torch.tensor([[t == sep_token for t in row] for row in tokens], dtype=torch.bool))
    raise ValueError("special_token_masks needs input_ids or tokens to find [CLS] and [SEP].")


def attention_shares(attention: torch.Tensor, is_cls: torch.Tensor, is_sep: torch.Tensor,
                     attention_mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Share of each head's attention on [CLS], on [SEP] and on the query itself: {"cls", "sep", "self"} -> (B, nh).

    Averaged over real queries; padded keys never count.
    """
    p = _check_attention(attention)
    B, _, T, S = p.shape
    if tuple(is_cls.shape) != (B, S) or tuple(is_sep.shape) != (B, S):
        raise ValueError(f"is_cls and is_sep must be (batch={B}, key_len={S}), got {tuple(is_cls.shape)} "
                         f"and {tuple(is_sep.shape)}.")
    keys = key_mask(attention_mask, B, S)
    queries = _query_mask(keys, T).to(p.dtype)
    diagonal = torch.arange(T) + (S - T)
    per_query = {
        CLS: (p * (is_cls.cpu() & keys)[:, None, None, :].to(p.dtype)).sum(-1),
        SEP: (p * (is_sep.cpu() & keys)[:, None, None, :].to(p.dtype)).sum(-1),
        SELF: p[:, :, torch.arange(T), diagonal],
    }
    count = queries.sum(-1, keepdim=True).clamp_min(1)
    return {k: ((v * queries[:, None, :]).sum(-1) / count).float() for k, v in per_query.items()}


def head_statistics(trace: "Trace", *, cls_token_id: int = 101, sep_token_id: int = 102) -> dict[str, torch.Tensor]:
    """Entropy and [CLS]/[SEP]/self shares of every recorded layer and head: {name: (L, B, nh)}."""
    layers, mask = _layers(trace)
    is_cls, is_sep = special_token_masks(trace.input_ids, trace.tokens, cls_token_id=cls_token_id,
                                         sep_token_id=sep_token_id)
    stats: dict[str, list[torch.Tensor]] = {ENTROPY: [], CLS: [], SEP: [], SELF: []}
    for attention in layers:
        stats[ENTROPY].append(head_entropy(attention, mask))
        for key, value in attention_shares(attention, is_cls, is_sep, mask).items():
            stats[key].append(value)
    return {k: torch.stack(v) for k, v in stats.items()}
