"""Fused GPU inference paths: residual add + LayerNorm in one Triton kernel, bias + GELU in the GEMM's epilogue.

In a bf16 forward on a GPU, eager PyTorch spends about a third of the time in elementwise passes (residual add,
LayerNorm, GELU) that each re-read the (tokens, hidden) activations. These paths remove two of those passes.
They are taken only where they compute the same function as the plain modules: on CUDA, without autograd, with
dropout inactive and with no hooks on the modules they stand in for (a trace sees every module as usual).
Everywhere else, and with BERTVIZ_LAB_FUSED_KERNELS=0 or inside `disabled()`, the layers run plain PyTorch.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import torch
from torch import nn
from torch.nn.modules import module as _module

from bertviz_lab.model.config import TANH_GELU_NAMES

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only builds of torch come without Triton
    triton = None

ENABLED = os.environ.get("BERTVIZ_LAB_FUSED_KERNELS", "1") != "0"
MAX_FUSED_WIDTH = 8192  # one row per Triton program; wider rows fall back to PyTorch
# Launching a Triton kernel costs the host ~30 µs more than PyTorch's LayerNorm; below about this many activations
# (a few thousand tokens) a forward is bound by the host, and plain PyTorch is faster (measured on an H200).
MIN_FUSED_ELEMENTS = 1 << 21


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run plain PyTorch inside the block (to compare against, or to rule the fused paths out)."""
    global ENABLED
    before, ENABLED = ENABLED, False
    try:
        yield
    finally:
        ENABLED = before


def _unhooked(*modules: nn.Module) -> bool:
    if _module._global_forward_hooks or _module._global_forward_pre_hooks:
        return False
    return not any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def _eligible(x: torch.Tensor, *modules: nn.Module) -> bool:
    """Whether a fused path may replace `modules` for input `x`."""
    return (ENABLED and x.is_cuda and not torch.is_grad_enabled() and not torch.is_autocast_enabled()
            and not torch.compiler.is_compiling() and _unhooked(*modules))


def can_add_layer_norm(x: torch.Tensor, residual: torch.Tensor, norm: nn.LayerNorm, dropout: nn.Dropout) -> bool:
    """Whether `norm(dropout(x) + residual)` may run as one kernel."""
    return (triton is not None and x.shape[-1] <= MAX_FUSED_WIDTH and x.numel() >= MIN_FUSED_ELEMENTS
            and x.shape == residual.shape
            and norm.elementwise_affine and norm.bias is not None and x.dtype == residual.dtype == norm.weight.dtype
            and not (dropout.training and dropout.p > 0) and _eligible(x, norm, dropout))


def add_layer_norm(x: torch.Tensor, residual: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    """LayerNorm(x + residual), the sum and statistics in fp32, in one read of each input and one write."""
    width = x.shape[-1]
    x2, r2 = x.reshape(-1, width).contiguous(), residual.reshape(-1, width).contiguous()
    out = torch.empty_like(x2)
    block = triton.next_power_of_2(width)
    _add_layer_norm_kernel[(x2.shape[0],)](x2, r2, norm.weight, norm.bias, out, width, norm.eps, BLOCK=block,
                                           num_warps=min(max(block // 256, 1), 8))
    return out.view(x.shape)


def can_linear_gelu(x: torch.Tensor, linear: nn.Linear, activation_name: str | None) -> bool:
    """Whether `gelu(linear(x))` may run as one GEMM with a bias + GELU epilogue.

    cuBLAS's epilogue computes the tanh form of GELU: exact for the tanh-GELU activations, and for the erf GELU
    within rounding in bf16/fp16 (|erf - tanh form| < 1e-3, under half a bf16 step of the values it changes).
    """
    if linear.bias is None or not hasattr(torch, "_addmm_activation") or x.dtype != linear.weight.dtype:
        return False
    if activation_name not in TANH_GELU_NAMES and not (activation_name == "gelu" and
                                                        x.dtype in (torch.bfloat16, torch.float16)):
        return False
    return _eligible(x, linear)


def linear_gelu(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    """gelu(x @ W.T + b) (tanh form) as one cuBLASLt GEMM."""
    y = torch._addmm_activation(linear.bias, x.reshape(-1, x.shape[-1]), linear.weight.t(), use_gelu=True)
    return y.view(*x.shape[:-1], y.shape[-1])


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
