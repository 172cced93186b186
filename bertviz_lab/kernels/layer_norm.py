"""Residual add + LayerNorm: one Triton kernel on a GPU where `choice.add_layer_norm_backend` allows, else PyTorch.

On a GPU (bf16), eager PyTorch spends about a third of a forward in elementwise passes that each re-read the
(tokens, hidden) activations; the sum and the statistics here take one read of each input and one write.
"""

from __future__ import annotations

import torch
from torch import nn

from bertviz_lab.kernels import choice

triton = choice.triton
if triton is not None:
    import triton.language as tl


def residual_layer_norm(x: torch.Tensor, residual: torch.Tensor, norm: nn.LayerNorm,
                        dropout: nn.Dropout) -> torch.Tensor:
    """norm(dropout(x) + residual)."""
    if choice.add_layer_norm_backend(x, residual, norm, dropout) == "triton":
        return triton_add_layer_norm(x, residual, norm)
    return norm(dropout(x) + residual)


def triton_add_layer_norm(x: torch.Tensor, residual: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    """LayerNorm(x + residual), the sum and statistics in fp32, in one read of each input and one write."""
    width = x.shape[-1]
    x2, r2 = x.reshape(-1, width).contiguous(), residual.reshape(-1, width).contiguous()
    out = torch.empty_like(x2)
    block = triton.next_power_of_2(width)
    _add_layer_norm_kernel[(x2.shape[0],)](x2, r2, norm.weight, norm.bias, out, width, norm.eps, BLOCK=block,
                                           num_warps=min(max(block // 256, 1), 8))
    return out.view(x.shape)


if triton is not None:

    @triton.jit
    def _add_layer_norm_kernel(x_ptr, residual_ptr, weight_ptr, bias_ptr, out_ptr, width, eps, BLOCK: tl.constexpr):
        """One row per program: load x and residual, sum and normalise in fp32, write in the input dtype."""
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        inside = cols < width
        x = tl.load(x_ptr + row * width + cols, mask=inside, other=0.0).to(tl.float32)
        x += tl.load(residual_ptr + row * width + cols, mask=inside, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / width
        centred = tl.where(inside, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=0) / width + eps)
        weight = tl.load(weight_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        bias = tl.load(bias_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        y = centred * rstd * weight + bias
        tl.store(out_ptr + row * width + cols, y.to(out_ptr.dtype.element_ty), mask=inside)
