"""Attention backends with one signature, and the call that picks one of them.

Every backend takes (q, k, v, mask, scale, dropout_p, probs_point) with q (B, nh, T, hs), k and v (B, nh, S, hs)
and an additive mask broadcastable to (B, nh, T, S), and returns (context (B, nh, T, hs), probabilities or None).
`probs_point` is the layer's `probs` HookPoint when someone watches it: the backend then computes the
probabilities and passes them through it, and the context is taken with what its hooks return.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F

from bertviz_lab.kernels import avx2, choice

Attention = tuple[torch.Tensor, torch.Tensor | None]


class ProbsPoint(Protocol):
    """What attention needs of a HookPoint (bertviz_lab.model.hook_points)."""

    is_watched: bool
    is_read_only: bool

    def __call__(self, probs: torch.Tensor, *, handed_over: bool = False) -> torch.Tensor: ...


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
              dropout_p: float = 0.0, probs_point: ProbsPoint | None = None) -> Attention:
    """softmax(scale * q @ k.T + mask) @ v on the backend `choice.attention_backend` picks for this call."""
    watched = probs_point is not None and probs_point.is_watched
    backend = BACKENDS[choice.attention_backend(q, mask, dropout_p, watched)]
    return backend(q, k, v, mask, scale, dropout_p, probs_point if watched else None)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
         dropout_p: float, probs_point: ProbsPoint | None) -> Attention:
    """PyTorch's fused attention (flash, memory-efficient or math): it never forms the probabilities."""
    if probs_point is not None:
        raise ValueError("SDPA does not form the attention probabilities that a watched layer needs")
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale), None


def explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
             dropout_p: float, probs_point: ProbsPoint | None) -> Attention:
    """The softmax written out, so that the probabilities exist to be watched (and replaced)."""
    # in place where autograd allows: one (B, nh, T, S) buffer instead of up to four
    scores = (q @ k.transpose(-2, -1)).mul_(scale)  # (B, nh, T, S)
    if mask is not None:
        scores.add_(mask)
    if scores.dtype == torch.float32 and not scores.requires_grad:
        probs = torch.softmax(scores, dim=-1, out=scores)
    else:
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    if probs_point is not None:
        probs = probs_point(probs)
    return F.dropout(probs, dropout_p, training=dropout_p > 0) @ v, probs  # (B, nh, T, hs)


def avx2_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
                dropout_p: float, probs_point: ProbsPoint | None) -> Attention:
    """avx2.c's attention (fp32 CPU inference, no dropout). Hooks that only read get the probabilities from the
    same pass, handed over, and the kernel's context stands: a traced forward equals the untraced one bit for bit.
    Hooks that may change them get the kernel's probabilities and the context is their product with v."""
    if dropout_p:
        raise ValueError(f"the AVX2 attention kernel has no dropout, got dropout_p={dropout_p}")
    B, nh, T, hs = q.shape
    if probs_point is None:
        context, probs = avx2.attention(q, k, v, mask, scale), None
    elif probs_point.is_read_only:
        context, probs = avx2.attention(q, k, v, mask, scale, with_probabilities=True)
        probs_point(probs, handed_over=True)
    else:
        probs = probs_point(avx2.attention_probabilities(q, k, mask, scale))
        return probs @ v, probs
    return context.view(B, T, nh, hs).transpose(1, 2), probs  # the kernel writes (B, T, nh * hs)


BACKENDS = {"sdpa": sdpa, "explicit": explicit, "avx2": avx2_kernel}
