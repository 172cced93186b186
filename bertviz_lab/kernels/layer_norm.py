"""Residual add + LayerNorm in one pass: the backend `choice.choose` gives a model's output layers once, a Triton
kernel for a CUDA device where Triton is installed, avx2.c's for fp32 weights on a CPU that runs its kernels.

On a GPU (bf16), eager PyTorch spends about a third of a forward in elementwise passes that each re-read the
(tokens, hidden) activations; the sum and the statistics here take one read of each input and one write. On a
2-core CPU, PyTorch's add and LayerNorm take ~2.1 ms for 2,560 x 384 activations, avx2.c's pass 0.4 ms.
"""

from __future__ import annotations

import torch

from bertviz_lab.kernels import avx2
from bertviz_lab.kernels.attention import cpu_inference

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only builds of torch come without Triton
    triton = None

MAX_FUSED_WIDTH = 8192  # one row per Triton program; wider rows fall back to PyTorch
# Launching a Triton kernel costs the host ~30 µs more than PyTorch's LayerNorm; below about this many activations
# (a few thousand tokens) a forward is bound by the host, and plain PyTorch is faster (measured on an H200).
MIN_FUSED_ELEMENTS = 1 << 21


class AddLayerNorm:
    """LayerNorm(dropout(x) + residual) in one pass: `__call__` answers it, or None where the backend does not apply
    (then: the layer's own modules)."""

    name = ""

    def __call__(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None,
                 bias: torch.Tensor | None, eps: float, dropout_p: float = 0.0) -> torch.Tensor | None:
        raise NotImplementedError

    def layer_norm(self, x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
                   eps: float) -> torch.Tensor | None:
        """LayerNorm(x) with the arithmetic of `__call__` on a sum already formed, or None (then: nn.LayerNorm), for
        a layer whose LayerNorm a hook watches: its output is then bit for bit the fused pass's."""
        return None

    def __reduce__(self) -> tuple:
        return add_layer_norm_backend, (self.name,)  # copies and pickles of a model share the one instance

    def __repr__(self) -> str:
        return f"<add + LayerNorm backend {self.name!r}>"


class TritonAddLayerNorm(AddLayerNorm):
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


class AVX2AddLayerNorm(AddLayerNorm):
    """LayerNorm(dropout(x) + residual) for fp32 CPU inference (no active dropout, no autograd) in one pass of
    avx2.c; `layer_norm` has the same arithmetic for a hooked LayerNorm."""

    name = "avx2"

    def __call__(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None,
                 bias: torch.Tensor | None, eps: float, dropout_p: float = 0.0) -> torch.Tensor | None:
        if weight is None or bias is None or dropout_p or x.shape != residual.shape \
                or not _avx2_applies(x, residual, weight, bias):
            return None
        return avx2.add_layer_norm(x, residual, weight, bias, eps)

    def layer_norm(self, x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
                   eps: float) -> torch.Tensor | None:
        if weight is None or bias is None or not _avx2_applies(x, x, weight, bias):
            return None
        return avx2.add_layer_norm(x, None, weight, bias, eps)


def _avx2_applies(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None,
                  bias: torch.Tensor | None) -> bool:
    """fp32 CPU tensors with an affine LayerNorm over their last dimension, no autograd, no torch.compile trace, no
    CPU autocast, something to normalise."""
    return (weight is not None and bias is not None and x.numel() > 0 and cpu_inference()
            and all(t.dtype is torch.float32 and t.is_cpu for t in (x, residual, weight, bias))
            and weight.shape == bias.shape == x.shape[-1:])


TRITON = TritonAddLayerNorm()
AVX2 = AVX2AddLayerNorm()
BACKENDS = {backend.name: backend for backend in (TRITON, AVX2)}


def add_layer_norm_backend(name: str) -> AddLayerNorm:
    """The residual add + LayerNorm backend called `name`."""
    if name not in BACKENDS:
        raise ValueError(f"no add + LayerNorm backend {name!r}; there are {', '.join(map(repr, BACKENDS))}.")
    return BACKENDS[name]


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
