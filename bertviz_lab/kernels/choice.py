"""The one place that decides, per call, which backend runs attention, a linear layer, residual add + LayerNorm
and the first feed-forward layer's GELU; every rule the fast paths obey is here.

Each fast path computes the same function as the plain modules and is taken only where it is faster and where no
one could tell it apart: inference (no autograd, no active dropout), not inside a torch.compile trace, and no hook
on a module it would replace. BERTVIZ_LAB_FUSED_KERNELS=0, or `disabled()`, turns every one off;
BERTVIZ_LAB_CPU_GEMM=auto|avx2|onednn|off picks the CPU's packed GEMM.
"""

from __future__ import annotations

import contextlib
import os
import platform
from typing import Iterator

import torch
from torch import nn
from torch.nn.modules import module as _module

from bertviz_lab.kernels import build
from bertviz_lab.model.config import TANH_GELU_NAMES

try:
    import triton
except ImportError:  # CPU-only builds of torch come without Triton
    triton = None

ENABLED = os.environ.get("BERTVIZ_LAB_FUSED_KERNELS", "1") != "0"
CPU_GEMM_CHOICES = ("auto", "avx2", "onednn", "off")  # BERTVIZ_LAB_CPU_GEMM
MAX_FUSED_WIDTH = 8192  # one row per Triton program; wider rows fall back to PyTorch
# Launching a Triton kernel costs the host ~30 µs more than PyTorch's LayerNorm; below about this many activations
# (a few thousand tokens) a forward is bound by the host, and plain PyTorch is faster (measured on an H200).
MIN_FUSED_ELEMENTS = 1 << 21
# CPU: a packed GEMM wins from about this much work (rows x in x out); smaller products are cheaper through
# addmm's lighter call. oneDNN's wins only up to this many rows; on larger products it lost on some shapes
# (measured on a 2-core AMD EPYC, AVX2; benchmarks/README.md).
MIN_PACKED_WORK = 1 << 20
MAX_ONEDNN_ROWS = 1024
ONEDNN_PACKING = (platform.machine().lower() in ("x86_64", "amd64") and torch.backends.mkldnn.is_available()
                  and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run plain PyTorch inside the block (to compare against, or to rule the fast paths out)."""
    global ENABLED
    before, ENABLED = ENABLED, False
    try:
        yield
    finally:
        ENABLED = before


def unhooked(*modules: nn.Module) -> bool:
    """No hook on `modules` and no module-wide hook: nobody could see that a fast path replaced them."""
    if _module._global_forward_hooks or _module._global_forward_pre_hooks:
        return False
    return not any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def inference_outside_compile() -> bool:
    """What every fast path needs: switched on, no autograd, not inside a torch.compile trace."""
    return ENABLED and not torch.is_grad_enabled() and not torch.compiler.is_compiling()


def cpu_autocast() -> bool:
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4
        return torch.is_autocast_cpu_enabled()


def cpu_backend() -> str | None:
    """The packed GEMM for fp32 CPU inference: "avx2" (avx2.c, built on first use) where it can run, else "onednn"
    on x86, else None for plain `addmm`; BERTVIZ_LAB_CPU_GEMM picks one for comparisons."""
    global _cpu_backend
    if _cpu_backend is _UNSET:
        wanted = os.environ.get("BERTVIZ_LAB_CPU_GEMM", "auto")
        if wanted not in CPU_GEMM_CHOICES:
            raise ValueError(f"BERTVIZ_LAB_CPU_GEMM={wanted!r}: use auto, avx2, onednn or off")
        if wanted in ("auto", "avx2") and build.library() is not None:
            _cpu_backend = "avx2"
        elif wanted in ("auto", "onednn") and ONEDNN_PACKING:
            _cpu_backend = "onednn"
        else:
            _cpu_backend = None
    return _cpu_backend


_UNSET = object()
_cpu_backend: str | None | object = _UNSET


def attention_backend(q: torch.Tensor, mask: torch.Tensor | None, dropout_p: float, watched: bool) -> str:
    """"avx2" (fp32 CPU inference, no dropout, head size a multiple of 16, additive fp32 mask or none: 1.2-1.3x
    SDPA's CPU flash kernel from 128 tokens), else "explicit" where the probabilities are watched, else "sdpa"."""
    if (dropout_p == 0.0 and q.dtype == torch.float32 and q.device.type == "cpu" and q.shape[-1] % 16 == 0
            and (mask is None or (mask.dtype == torch.float32 and mask.dim() == 4))
            and inference_outside_compile() and not cpu_autocast() and cpu_backend() == "avx2"):
        return "avx2"
    return "explicit" if watched else "sdpa"


def linear_backend(x: torch.Tensor, weight: torch.Tensor) -> str | None:
    """The packed GEMM a linear layer runs `x` on ("avx2" or "onednn"), or None for `F.linear`."""
    out_features, in_features = weight.shape
    if not (inference_outside_compile()
            and x.dtype == weight.dtype == torch.float32 and x.device.type == weight.device.type == "cpu"
            and not weight.is_inference()  # made in inference mode: no version counter to follow
            and not cpu_autocast()
            and x.numel() * out_features >= MIN_PACKED_WORK):  # rows x in x out multiply-adds
        return None
    backend = cpu_backend()
    if backend == "onednn" and (x.numel() > MAX_ONEDNN_ROWS * in_features or not torch.backends.mkldnn.enabled):
        return None
    return backend


def linear_gelu_backend(x: torch.Tensor, linear: nn.Linear, activation_name: str | None) -> str | None:
    """Where `gelu(linear(x))` may run as one GEMM with a bias + GELU epilogue: "avx2" (erf form, as exact as
    PyTorch's) for fp32 CPU inference, "cublaslt" on a GPU (tanh form: exact for the tanh-GELU activations, and
    for the erf GELU within rounding in bf16/fp16, |erf - tanh form| < 1e-3), or None."""
    if linear.bias is None or x.dtype != linear.weight.dtype:
        return None
    if x.device.type == "cpu":
        packs = getattr(linear, "packs_weights", False)  # a kernels.Linear keeps the packed copy the kernel needs
        return "avx2" if activation_name == "gelu" and packs and linear_backend(x, linear.weight) == "avx2" else None
    if not hasattr(torch, "_addmm_activation"):
        return None
    if activation_name not in TANH_GELU_NAMES and not (activation_name == "gelu" and
                                                        x.dtype in (torch.bfloat16, torch.float16)):
        return None
    return "cublaslt" if _gpu_inference(x, linear) else None


def add_layer_norm_backend(x: torch.Tensor, residual: torch.Tensor, norm: nn.LayerNorm,
                           dropout: nn.Dropout) -> str | None:
    """"triton" where `norm(dropout(x) + residual)` may run as one GPU kernel (2M activations or more), or None."""
    if (triton is not None and x.shape[-1] <= MAX_FUSED_WIDTH and x.numel() >= MIN_FUSED_ELEMENTS
            and x.shape == residual.shape
            and norm.elementwise_affine and norm.bias is not None and x.dtype == residual.dtype == norm.weight.dtype
            and not (dropout.training and dropout.p > 0) and _gpu_inference(x, norm, dropout)):
        return "triton"
    return None


def _gpu_inference(x: torch.Tensor, *modules: nn.Module) -> bool:
    """Whether a fused GPU path may replace `modules` for input `x`."""
    return (x.is_cuda and inference_outside_compile() and not torch.is_autocast_enabled()
            and unhooked(*modules))
