"""Inference fast paths that compute the same function as the plain modules, taken only where they are faster.

On a GPU (bf16), eager PyTorch spends about a third of a forward in elementwise passes (residual add, LayerNorm,
GELU) that each re-read the (tokens, hidden) activations: residual add + LayerNorm run as one Triton kernel and
bias + GELU in the GEMM's epilogue. They stand aside for autograd, active dropout and hooks on the modules they
replace (a trace sees every module as usual).
On an x86 CPU (fp32 inference), `Linear` runs on a pre-packed copy of its weight, through our AVX2 GEMM
(cpu_gemm.c) or oneDNN's, both faster than MKL's `addmm` on BERT's shapes (see `Linear` and `cpu_backend`); with
the AVX2 kernels, attention and the first feed-forward layer's bias + GELU run there too.
Everywhere else, and with BERTVIZ_LAB_FUSED_KERNELS=0 or inside `disabled()`, the layers run plain PyTorch.
"""

from __future__ import annotations

import contextlib
import os
import platform
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as _module

from bertviz_lab.model import cpu_gemm
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
# CPU: a packed GEMM wins from about this much work (rows x in x out); smaller products are cheaper through
# addmm's lighter call. oneDNN's wins only up to this many rows; on larger products it lost on some shapes
# (measured on a 2-core AMD EPYC, AVX2; benchmarks/README.md).
MIN_PACKED_WORK = 1 << 20
MAX_ONEDNN_ROWS = 1024
ONEDNN_ROWS_HINT = 1024  # the row count oneDNN chooses the packed layout for
ONEDNN_PACKING = (platform.machine().lower() in ("x86_64", "amd64") and torch.backends.mkldnn.is_available()
                  and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


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


def _inference_outside_compile() -> bool:
    """What every fast path needs: switched on, no autograd, not inside a torch.compile trace."""
    return ENABLED and not torch.is_grad_enabled() and not torch.compiler.is_compiling()


def _eligible(x: torch.Tensor, *modules: nn.Module) -> bool:
    """Whether a fused GPU path may replace `modules` for input `x`."""
    return (x.is_cuda and _inference_outside_compile() and not torch.is_autocast_enabled()
            and _unhooked(*modules))


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

    On a GPU, cuBLAS's epilogue computes the tanh form of GELU: exact for the tanh-GELU activations, and for the erf
    GELU within rounding in bf16/fp16 (|erf - tanh form| < 1e-3, under half a bf16 step of the values it changes).
    On the CPU, cpu_gemm.c's epilogue computes the erf form (as exact as PyTorch's) on the AVX2 backend.
    """
    if linear.bias is None or x.dtype != linear.weight.dtype:
        return False
    if x.device.type == "cpu":
        return (activation_name == "gelu" and isinstance(linear, Linear)
                and linear._packed_backend(x, linear.weight) == "avx2")
    if not hasattr(torch, "_addmm_activation"):
        return False
    if activation_name not in TANH_GELU_NAMES and not (activation_name == "gelu" and
                                                        x.dtype in (torch.bfloat16, torch.float16)):
        return False
    return _eligible(x, linear)


def linear_gelu(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    """gelu(x @ W.T + b) as one GEMM: cuBLASLt's (tanh form) on a GPU, cpu_gemm.c's (erf form) on the CPU.

    On the CPU a hooked layer runs first (its hooks see, and may change, the output before GELU), then the same
    GELU arithmetic in a second pass: a trace that only watches leaves every output bit for bit as it was.
    """
    if x.device.type == "cpu":
        if not _unhooked(linear):
            return cpu_gemm.gelu(linear(x))
        return cpu_gemm.linear(x, linear._packed_weight(linear.weight, "avx2"), linear.bias, linear.out_features,
                               gelu=True)
    y = torch._addmm_activation(linear.bias, x.reshape(-1, x.shape[-1]), linear.weight.t(), use_gelu=True)
    return y.view(*x.shape[:-1], y.shape[-1])


def _cpu_autocast() -> bool:
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4
        return torch.is_autocast_cpu_enabled()


def can_attend_on_cpu(q: torch.Tensor, mask: torch.Tensor | None, dropout_p: float) -> bool:
    """Whether attention may run as cpu_gemm.c's kernel (fp32 CPU inference on the AVX2 backend, no dropout,
    head size a multiple of 16, mask additive fp32 or none); it is 1.2-1.3x as fast as SDPA's CPU flash kernel
    from 128 tokens (benchmarks/README.md)."""
    return (dropout_p == 0.0 and q.dtype == torch.float32 and q.device.type == "cpu" and q.shape[-1] % 16 == 0
            and (mask is None or (mask.dtype == torch.float32 and mask.dim() == 4))
            and _inference_outside_compile() and not _cpu_autocast() and cpu_backend() == "avx2")


def cpu_backend() -> str | None:
    """The packed GEMM `Linear` uses for fp32 CPU inference: "avx2", "onednn", or None for plain `addmm`.

    "avx2" (cpu_gemm.c, built on first use) where it can run, else "onednn" on x86; BERTVIZ_LAB_CPU_GEMM picks one
    ("avx2", "onednn" or "off") for comparisons.
    """
    global _cpu_backend
    if _cpu_backend is _UNSET:
        wanted = os.environ.get("BERTVIZ_LAB_CPU_GEMM", "auto")
        if wanted not in ("auto", "avx2", "onednn", "off"):
            raise ValueError(f"BERTVIZ_LAB_CPU_GEMM={wanted!r}: use auto, avx2, onednn or off")
        if wanted in ("auto", "avx2") and cpu_gemm.library() is not None:
            _cpu_backend = "avx2"
        elif wanted in ("auto", "onednn") and ONEDNN_PACKING:
            _cpu_backend = "onednn"
        else:
            _cpu_backend = None
    return _cpu_backend


_UNSET = object()
_cpu_backend: str | None | object = _UNSET


class Linear(nn.Linear):
    """nn.Linear whose fp32 CPU inference runs a faster GEMM on a copy of its weight packed for it (`cpu_backend`).

    On the 2-core AMD EPYC we measure on, cpu_gemm.c is 1.1-1.9x as fast as MKL's `addmm` on the few-row products of
    short inputs (32-128 rows) and 1.1-1.4x from 512 rows, oneDNN mostly in between (`benchmarks/cpu_gemm.py`).
    The packed copy, as large as the weight, is made on the first such call, rebuilt when the weight changes in
    place or moves, and dropped when the layer runs with autograd or its weight leaves the CPU or fp32. Weights
    created inside `torch.inference_mode()` have no version counter to follow and stay on the plain path. Forward
    hooks see an nn.Linear; the checkpoint names are its own.
    """

    _packed: tuple[str, int, int, torch.Tensor] | None = None  # (backend, weight data_ptr, version, packed weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight  # one module attribute lookup: this runs for every layer of a short forward
        backend = self._packed_backend(x, weight)
        if backend == "avx2":
            return cpu_gemm.linear(x, self._packed_weight(weight, backend), self.bias, self.out_features)
        if backend == "onednn":
            return torch.ops.mkldnn._linear_pointwise(x, self._packed_weight(weight, backend), self.bias,
                                                      "none", [], "")
        if self._packed is not None and not torch.compiler.is_compiling() and (
                torch.is_grad_enabled() or weight.device.type != "cpu" or weight.dtype != torch.float32):
            self._packed = None  # training, or the weight moved: the copy would only hold memory
        return F.linear(x, weight, self.bias)

    def _packed_backend(self, x: torch.Tensor, weight: torch.Tensor) -> str | None:
        """The packed GEMM `forward(x)` runs on ("avx2" or "onednn"), or None for `F.linear`."""
        if not (_inference_outside_compile()
                and x.dtype == weight.dtype == torch.float32 and x.device.type == weight.device.type == "cpu"
                and not weight.is_inference()  # made in inference mode: no version counter to follow
                and not _cpu_autocast()
                and x.numel() * self.out_features >= MIN_PACKED_WORK):  # rows x in x out multiply-adds
            return None
        backend = cpu_backend()
        if backend == "onednn" and (x.numel() > MAX_ONEDNN_ROWS * self.in_features
                                    or not torch.backends.mkldnn.enabled):
            return None
        return backend

    def _packed_weight(self, weight: torch.Tensor, backend: str) -> torch.Tensor:
        packed = self._packed
        if (packed is None or packed[0] != backend or packed[1] != weight.data_ptr()
                or packed[2] != weight._version):
            data = weight.detach()
            copy = (cpu_gemm.pack(data) if backend == "avx2"
                    else torch.ops.mkldnn._reorder_linear_weight(data, ONEDNN_ROWS_HINT))
            packed = self._packed = (backend, data.data_ptr(), weight._version, copy)
        return packed[3]

    def __getstate__(self) -> dict:
        """Copies and pickles leave the packed weight out (oneDNN tensors have no storage to copy)."""
        state = super().__getstate__()
        state.pop("_packed", None)
        return state


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
