"""Attention backends: functions of tensors that `choice.choose` gives each attention layer once, for the device
and dtype of its weights (as Hugging Face's `config._attn_implementation`).

A backend takes q (B, nh, T, hs), k and v (B, nh, S, hs), an additive mask broadcastable to (B, nh, T, S) or None,
the scale and the dropout probability, and answers (softmax(scale * q @ k.T + mask) @ v as (B, nh, T, hs), None);
with `probabilities`, (that output, the probabilities (B, nh, T, S) from the same pass), or None where it does not
form them. "eager", the math written out, is the model's own (bertviz_lab.model.layers) and the reference every
backend equals.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bertviz_lab.kernels import avx2

Attended = tuple[torch.Tensor, torch.Tensor | None]  # (output (B, nh, T, hs), probabilities (B, nh, T, S) or None)


def cpu_inference() -> bool:
    """Whether an fp32 CPU kernel may stand in for PyTorch's ops in this call: no autograd, not inside a
    torch.compile trace, no CPU autocast."""
    if torch.is_grad_enabled() or torch.compiler.is_compiling():
        return False
    try:
        return not torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4
        return not torch.is_autocast_cpu_enabled()


class AttentionBackend:
    """PyTorch's fused attention (flash, memory-efficient or math); it never forms the probabilities."""

    name = "sdpa"

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
                 dropout_p: float = 0.0, probabilities: bool = False) -> Attended | None:
        if probabilities:
            return None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale), None

    def __reduce__(self) -> tuple:
        return backend, (self.name,)  # copies and pickles of a model share the one instance

    def __repr__(self) -> str:
        return f"<attention backend {self.name!r}>"


class AVX2Attention(AttentionBackend):
    """avx2.c's one-pass attention, for a layer of fp32 CPU weights with a head size that is a multiple of 16.
    Autograd, dropout, autocast and torch.compile traces, which it has no part for, run on SDPA."""

    name = "avx2"

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
                 dropout_p: float = 0.0, probabilities: bool = False) -> Attended | None:
        if dropout_p or not cpu_inference():
            return SDPA(q, k, v, mask, scale, dropout_p, probabilities)
        B, nh, T, hs = q.shape
        if probabilities:
            out, probs = avx2.attention(q, k, v, mask, scale, with_probabilities=True)
        else:
            out, probs = avx2.attention(q, k, v, mask, scale), None
        return out.view(B, T, nh, hs).transpose(1, 2), probs  # the kernel writes (B, T, nh * hs)


SDPA = AttentionBackend()
BACKENDS: dict[str, AttentionBackend | None] = {"eager": None, "sdpa": SDPA, "avx2": AVX2Attention()}


def backend(name: str) -> AttentionBackend | None:
    """The backend called `name` (None for "eager", the layer's own math)."""
    if name not in BACKENDS:
        raise ValueError(f"no attention backend {name!r}; there are {', '.join(BACKENDS)}.")
    return BACKENDS[name]
