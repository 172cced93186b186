"""The entropy of distributions along the last dimension (an attention map's rows), for statistics over many maps:
the AVX2 kernel's one pass for fp32 CPU tensors where it builds, PyTorch's `entr` elsewhere; both are
-sum p ln p with 0 ln 0 = 0."""

from __future__ import annotations

import torch

from bertviz_lab.kernels import avx2, rules


def entropy(p: torch.Tensor) -> torch.Tensor:
    """-sum p ln p (nats) over the last dimension of p, shaped as p without it."""
    tracked = p.requires_grad and torch.is_grad_enabled()
    if rules.cpu_reductions(p.device, p.dtype) and p.numel() > 0 and not tracked:
        return avx2.entropy(p)
    return torch.special.entr(p).sum(-1)
