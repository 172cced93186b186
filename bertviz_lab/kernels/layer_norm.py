"""Residual add + LayerNorm in one Triton kernel on a GPU: the backend `choice.choose` gives a model's output
layers once for a CUDA device where Triton is installed.

On a GPU (bf16), eager PyTorch spends about a third of a forward in elementwise passes that each re-read the
(tokens, hidden) activations; the sum and the statistics here take one read of each input and one write.
"""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only builds of torch come without Triton
    triton = None

MAX_FUSED_WIDTH = 8192  # one row per Triton program; wider rows fall back to PyTorch
# Launching a Triton kernel costs the host ~30 µs more than PyTorch's LayerNorm; below about this many activations
# (a few thousand tokens) a forward is bound by the host, and plain PyTorch is faster (measured on an H200).
MIN_FUSED_ELEMENTS = 1 << 21


class TritonAddLayerNorm:
    """LayerNorm(dropout(x) + residual) for GPU inference (no active dropout), the sum and statistics in fp32."""

    name = "triton"

    def __call__(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None,
                 bias: torch.Tensor | None, eps: float, dropout_p: float = 0.0) -> torch.Tensor | None:
        """The normalised sum, or None where this backend does not apply (then: the layer's own modules)."""
        if (dropout_p or weight is None or bias is None or not x.is_cuda or x.shape != residual.shape
                or x.shape[-1] > MAX_FUSED_WIDTH or x.numel() < MIN_FUSED_ELEMENTS
                or not x.dtype == residual.dtype == weight.dtype or torch.is_grad_enabled()
                or torch.compiler.is_compiling() or torch.is_autocast_enabled()):
            return None
        return triton_add_layer_norm(x, residual, weight, bias, eps)

    def __reduce__(self) -> tuple:
        return add_layer_norm_backend, (self.name,)  # copies and pickles of a model share the one instance

    def __repr__(self) -> str:
        return f"<add + LayerNorm backend {self.name!r}>"


TRITON = TritonAddLayerNorm()


def add_layer_norm_backend(name: str) -> TritonAddLayerNorm:
    """The residual add + LayerNorm backend called `name`."""
    if name != TRITON.name:
        raise ValueError(f"no add + LayerNorm backend {name!r}; there is {TRITON.name!r}.")
    return TRITON


def triton_add_layer_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                          eps: float) -> torch.Tensor:
    """LayerNorm(x + residual), the sum and statistics in fp32, in one read of each input and one write."""
    width = x.shape[-1]
    x2, r2 = x.reshape(-1, width).contiguous(), residual.reshape(-1, width).contiguous()
    out = torch.empty_like(x2)
    block = triton.next_power_of_2(width)
    _add_layer_norm_kernel[(x2.shape[0],)](x2, r2, weight, bias, out, width, eps, BLOCK=block,
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
