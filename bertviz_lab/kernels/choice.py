"""The one place that decides which backend runs attention, a linear layer, residual add + LayerNorm and the
first feed-forward layer's GELU; every rule the fast paths obey is here.

Attention is chosen once per layer (`choose`: when a model is built or moved, and again for every live layer when
`override` or `disabled` changes the rules), from the device and dtype of its weights and its head size. Each
fast path computes the same function as the plain modules and is taken only where it is faster and where no one
could tell it apart: inference (no autograd, no active dropout), not inside a torch.compile trace, and no hook on a
module it would replace. BERTVIZ_LAB_FUSED_KERNELS=0, or `disabled()`, turns every one off;
BERTVIZ_LAB_CPU_GEMM=auto|avx2|onednn|off picks the CPU's packed GEMM; `override(...)` picks either for a block.
"""

from __future__ import annotations

import contextlib
import os
import platform
import weakref
from typing import Iterator

import torch
from torch import nn
from torch.nn.modules import module as _module

from bertviz_lab.kernels import attention, build
from bertviz_lab.kernels.attention import cpu_autocast
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
    _choose_again()
    try:
        yield
    finally:
        ENABLED = before
        _choose_again()


_forced_attention: str | None = None  # override(attention=...)


@contextlib.contextmanager
def override(*, attention: str | None = None, cpu_gemm: str | None = None) -> Iterator[None]:
    """Inside the block every attention layer runs `attention` ("eager", "sdpa" or "avx2"; a layer the kernel
    cannot run keeps SDPA) and the linear layers `cpu_gemm` ("avx2", "onednn" or "off"); both as before on exit,
    also after an error. Asking for a backend this machine cannot run is an error saying why."""
    global _forced_attention, _cpu_backend
    if attention is not None and attention not in _ATTENTION_NAMES:
        raise ValueError(f"override(attention={attention!r}): use one of {', '.join(_ATTENTION_NAMES)}.")
    if cpu_gemm is not None and cpu_gemm not in CPU_GEMM_CHOICES[1:]:
        raise ValueError(f"override(cpu_gemm={cpu_gemm!r}): use avx2, onednn or off.")
    gemm = _cpu_backend if cpu_gemm is None else (None if cpu_gemm == "off" else cpu_gemm)
    if "avx2" in (attention, gemm) and build.library() is None:
        raise ValueError(f"the AVX2 kernels cannot run here: {build.unsupported_reason() or build.failure()}")
    if gemm == "onednn" and not ONEDNN_PACKING:
        raise ValueError("oneDNN's packed GEMM needs an x86 CPU and a PyTorch with oneDNN's packed linear.")
    before = _forced_attention, _cpu_backend
    _forced_attention, _cpu_backend = attention if attention is not None else _forced_attention, gemm
    _choose_again()
    try:
        yield
    finally:
        _forced_attention, _cpu_backend = before
        _choose_again()


_ATTENTION_NAMES = tuple(attention.BACKENDS)
_layers: weakref.WeakSet = weakref.WeakSet()  # every attention layer given a backend, to choose again


def choose(model: nn.Module) -> None:
    """Give every attention layer of `model` (a module with `attention_backend` and `head_size`) the backend for
    the device and dtype of its weights now; called when a model is built or moved."""
    for module in model.modules():
        if hasattr(module, "attention_backend") and hasattr(module, "head_size"):
            _layers.add(module)
            _assign(module)


def _assign(layer: nn.Module) -> None:
    weight = next(layer.parameters(), None)
    name = "sdpa" if weight is None else attention_backend_name(weight.device, weight.dtype, layer.head_size)
    layer.attention_backend = attention.BACKENDS[name]


def _choose_again() -> None:
    for layer in list(_layers):
        _assign(layer)


def attention_backend_name(device: torch.device, dtype: torch.dtype, head_size: int) -> str:
    """"avx2" for fp32 CPU weights with a head size that is a multiple of 16 where the kernel runs (1.2-1.3x SDPA's
    CPU flash kernel from 128 tokens), else "sdpa"; what `override` asks for where it applies."""
    kernel_fits = device.type == "cpu" and dtype == torch.float32 and head_size % 16 == 0
    if not ENABLED and _forced_attention != "eager":  # disabled() rules every fast path out, an override's too
        return "sdpa"
    if _forced_attention is not None:
        return _forced_attention if _forced_attention != "avx2" or kernel_fits else "sdpa"
    return "avx2" if kernel_fits and cpu_backend() == "avx2" else "sdpa"


def unhooked(*modules: nn.Module) -> bool:
    """No hook on `modules` and no module-wide hook: nobody could see that a fast path replaced them."""
    if _module._global_forward_hooks or _module._global_forward_pre_hooks:
        return False
    return not any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def inference_outside_compile() -> bool:
    """What every fast path needs: switched on, no autograd, not inside a torch.compile trace."""
    return ENABLED and not torch.is_grad_enabled() and not torch.compiler.is_compiling()


def cpu_backend() -> str | None:
    """The packed GEMM for fp32 CPU inference: "avx2" (avx2.c, built on first use) where it can run, else "onednn"
    on x86, else None for plain `addmm`; BERTVIZ_LAB_CPU_GEMM picks one for comparisons."""
    global _cpu_backend
    if _cpu_backend is _UNSET:
        _cpu_backend = cpu_gemm_from_environment()
    return _cpu_backend


def cpu_gemm_from_environment() -> str | None:
    """What BERTVIZ_LAB_CPU_GEMM (default auto) picks on this machine: "avx2", "onednn" or None."""
    wanted = os.environ.get("BERTVIZ_LAB_CPU_GEMM", "auto")
    if wanted not in CPU_GEMM_CHOICES:
        raise ValueError(f"BERTVIZ_LAB_CPU_GEMM={wanted!r}: use auto, avx2, onednn or off")
    if wanted in ("auto", "avx2") and build.library() is not None:
        return "avx2"
    if wanted in ("auto", "onednn") and ONEDNN_PACKING:
        return "onednn"
    return None


_UNSET = object()
_cpu_backend: str | None | object = _UNSET


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
