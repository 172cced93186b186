"""Attention backends: functions of tensors that `choice.choose` gives each attention layer once, for the device
and dtype of its weights (as Hugging Face's `config._attn_implementation`).

A backend takes q (B, nh, T, hs), k and v (B, nh, S, hs), an additive mask broadcastable to (B, nh, T, S) or None,
the scale and the dropout probability, and answers softmax(scale * q @ k.T + mask) @ v as (B, nh, T, hs);
`with_statistics` answers that and the per-head statistics of the probabilities a corpus analysis asks for
(bertviz_lab.model.attention_statistics). "eager", the math written out, is the model's own
(bertviz_lab.model.layers) and the reference every backend equals.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bertviz_lab.kernels import avx2
from bertviz_lab.kernels.statistics import attention_statistics

Statistics = tuple[torch.Tensor | None, torch.Tensor]  # (output (B, nh, T, hs) or None, statistics (B, nh, 7))


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
                 dropout_p: float = 0.0) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)

    def with_statistics(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                        scale: float, valid: torch.Tensor, kinds: torch.Tensor, output: bool = True) -> Statistics:
        """The output of an encoder's self-attention (none without `output`) and, beside it, its (B, nh, 7)
        per-head statistics (bertviz_lab.model.attention_statistics): keys where `valid` (B, S) is 0 masked out, the
        queries weighted by it, `kinds` (B, S, 3) the [CLS], [SEP] and punctuation keys; reduced in float32 (the
        AVX2 kernel where it runs), whatever the dtype of q and k."""
        statistics = attention_statistics(q.float(), k.float(), valid, kinds, scale)
        return (self(q, k, v, mask, scale) if output else None), statistics

    def __reduce__(self) -> tuple:
        return backend, (self.name,)  # copies and pickles of a model share the one instance

    def __repr__(self) -> str:
        return f"<attention backend {self.name!r}>"


class AVX2Attention(AttentionBackend):
    """avx2.c's one-pass attention, for a layer of fp32 CPU weights with a head size that is a multiple of 16.
    Autograd, dropout, autocast and torch.compile traces, which it has no part for, run on SDPA."""

    name = "avx2"

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
                 dropout_p: float = 0.0) -> torch.Tensor:
        if dropout_p or not cpu_inference():
            return SDPA(q, k, v, mask, scale, dropout_p)
        B, nh, T, hs = q.shape
        return avx2.attention(q, k, v, mask, scale).view(B, T, nh, hs).transpose(1, 2)  # it writes (B, T, nh * hs)

    def with_statistics(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                        scale: float, valid: torch.Tensor, kinds: torch.Tensor, output: bool = True) -> Statistics:
        """As SDPA's, the output and the statistics from one pass of the kernel."""
        if not output or not cpu_inference():
            return super().with_statistics(q, k, v, mask, scale, valid, kinds, output)
        B, nh, T, hs = q.shape
        out, statistics = avx2.attention_with_statistics(q, k, v, mask, scale, valid, kinds)
        return out.view(B, T, nh, hs).transpose(1, 2), statistics


SDPA = AttentionBackend()
BACKENDS: dict[str, AttentionBackend | None] = {"eager": None, "sdpa": SDPA, "avx2": AVX2Attention()}


def backend(name: str) -> AttentionBackend | None:
    """The backend called `name` (None for "eager", the layer's own math)."""
    if name not in BACKENDS:
        raise ValueError(f"no attention backend {name!r}; there are {', '.join(BACKENDS)}.")
    return BACKENDS[name]
