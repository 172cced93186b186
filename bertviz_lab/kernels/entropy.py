"""The entropy of distributions along the last dimension (an attention map's rows), for statistics over many maps:
the AVX2 kernel's one pass for fp32 CPU tensors where it builds, PyTorch's `entr` elsewhere; both are
-sum p ln p with 0 ln 0 = 0."""

from __future__ import annotations

import torch

from bertviz_lab.kernels import avx2, build, choice


def entropy(p: torch.Tensor) -> torch.Tensor:
    """-sum p ln p (nats) over the last dimension of p, shaped as p without it."""
    if (choice.ENABLED and p.device.type == "cpu" and p.dtype == torch.float32 and p.shape[-1] > 0
            and p.numel() > 0 and not (p.requires_grad and torch.is_grad_enabled()) and build.library() is not None):
        return avx2.entropy(p)
    return torch.special.entr(p).sum(-1)
