"""Per-head attention statistics for a corpus: for each (text, head), sums over the text's queries of the statistics
of head_statistics.STATISTICS (the entropy of the query's attention in nats, its weight on [CLS], on [SEP], on
itself, on the previous and on the next key, and on punctuation), in that order. `attention_statistics` takes a
layer's queries and keys: the AVX2 kernel's one pass, which never forms the probabilities, for fp32 CPU tensors where
it builds, else the probabilities in PyTorch and `probability_statistics`, which reduces probabilities already formed
(on any device)."""

from __future__ import annotations

import torch

from bertviz_lab.kernels import avx2, rules
from bertviz_lab.kernels.entropy import entropy
from bertviz_lab.kernels.head_statistics import STATISTIC_NAMES


def attention_statistics(q: torch.Tensor, k: torch.Tensor, valid: torch.Tensor, kinds: torch.Tensor,
                         scale: float) -> torch.Tensor:
    """(B, H, len(STATISTICS)) sums over the queries i of each text, weighted by valid[b, i], of the statistics of
    softmax(scale * q @ k.T) with the keys where `valid` is 0 masked out (BERT's padding mask).
    q, k (B, H, S, D) a self-attention layer's queries and keys; valid (B, S) float, 1 at real tokens; kinds
    (B, S, 3) float, which keys are [CLS], [SEP] and punctuation. float64 from the kernel, q's dtype elsewhere."""
    tracked = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad)
    if rules.cpu_reductions(q.device, q.dtype) and q.shape[-1] > 0 and not tracked:
        return avx2.attention_statistics(q, k, valid.float(), kinds.float(), scale)
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    scores = scores.masked_fill(valid[:, None, None, :] == 0, torch.finfo(scores.dtype).min)
    return probability_statistics(scores.softmax(dim=-1), valid, kinds[:, None])


def probability_statistics(probs: torch.Tensor, valid: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """(B, H, len(STATISTICS)) sums over each text's queries (weighted by `valid`) of the statistics of probabilities
    already formed: probs (B, H, T, S); valid (B, T) float, 1 at real tokens; keys (B, 1, S, 3) key kinds."""
    p = probs.float()
    queries = valid[:, None, :]  # (B, 1, T)
    entropies = (entropy(p) * queries).sum(-1)  # (B, H)
    weight_on_keys = torch.matmul(valid[:, None, None, :], p)  # (B, H, 1, S): each key's weight summed over queries
    by_kind = torch.matmul(weight_on_keys, keys).squeeze(2)  # (B, H, 3): on [CLS], [SEP], punctuation
    own = (p.diagonal(0, -2, -1) * queries).sum(-1)  # p[i, i]
    prev = (p.diagonal(-1, -2, -1) * queries[..., 1:]).sum(-1)  # p[i, i-1] for queries i >= 1
    nxt = (p.diagonal(1, -2, -1) * queries[..., :-1]).sum(-1)  # p[i, i+1] for every query but the last
    by_name = {"entropy": entropies, "cls": by_kind[..., 0], "sep": by_kind[..., 1], "self": own, "prev": prev,
               "next": nxt, "punct": by_kind[..., 2]}
    return torch.stack([by_name[name] for name in STATISTIC_NAMES], dim=-1)
