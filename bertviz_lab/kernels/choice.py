"""The one place that decides which backend runs attention, a linear layer, residual add + LayerNorm and the
first feed-forward layer's GELU, and where the reductions over attention run on the AVX2 kernels; every rule the
fast paths obey is here.

Each is chosen once per model (`choose`: when a model is built or moved, and again for every live model when
`override` or `disabled` changes the rules), from the device and dtype of a layer's weights, its head size and the
config's `hidden_act`, and given to the layer as a function of tensors (attention.py, linear.py, layer_norm.py);
None leaves the layer its plain modules and math. A backend computes the same function as those and answers only
where it is faster and nobody could tell it apart (inference: no autograd, no active dropout, not inside a
torch.compile trace); the layer calls its own modules wherever a hook watches one of them.
BERTVIZ_LAB_FUSED_KERNELS=0, or `disabled()`, turns every one off; BERTVIZ_LAB_CPU_GEMM=auto|avx2|onednn|off picks
the CPU's packed GEMM; `override(...)` picks either for a block.
"""

from __future__ import annotations

import contextlib
import os
import platform
import weakref
from typing import Iterator

import torch
from torch import nn

from bertviz_lab.kernels import attention, build, layer_norm, linear
from bertviz_lab.kernels.layer_norm import MIN_FUSED_ELEMENTS, triton
from bertviz_lab.kernels.linear import MIN_PACKED_WORK
from bertviz_lab.model.config import TANH_GELU_NAMES

__all__ = ["MIN_FUSED_ELEMENTS", "MIN_PACKED_WORK", "choose", "cpu_backend", "disabled", "override", "triton"]

ENABLED = os.environ.get("BERTVIZ_LAB_FUSED_KERNELS", "1") != "0"
CPU_GEMM_CHOICES = ("auto", "avx2", "onednn", "off")  # BERTVIZ_LAB_CPU_GEMM
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
_models: weakref.WeakSet = weakref.WeakSet()  # every model given backends, to choose again


def choose(model: nn.Module) -> None:
    """Give every layer of `model` its backends for the device and dtype of its weights now: attention to modules
    with `attention_backend` (and `head_size`), the packed GEMM to those with `linear_backend`, GELU in the GEMM's
    epilogue to those with `gelu_backend` (from `model.config.hidden_act`) and residual add + LayerNorm to those
    with `add_layer_norm_backend`; called when a model is built or moved. Packed weight copies that no longer match
    their weight are dropped."""
    _models.add(model)
    for parameter in model.parameters():
        linear.release(parameter)
    _assign(model)


def _assign(model: nn.Module) -> None:
    hidden_act = getattr(getattr(model, "config", None), "hidden_act", None)
    for module in model.modules():
        given = vars(module)
        if not any(name in given for name in BACKEND_ATTRIBUTES):
            continue
        weight = next(module.parameters(), None)
        device, dtype = (torch.device("cpu"), torch.float32) if weight is None else (weight.device, weight.dtype)
        if "attention_backend" in given and hasattr(module, "head_size"):
            name = "sdpa" if weight is None else attention_backend_name(device, dtype, module.head_size)
            module.attention_backend = attention.BACKENDS[name]
        if "linear_backend" in given:
            name = linear_backend_name(device, dtype)
            module.linear_backend = None if name is None else linear.packed_linear(name)
        if "gelu_backend" in given:
            name = gelu_backend_name(device, dtype, hidden_act)
            module.gelu_backend = None if name is None else linear.gelu_backend(name)
        if "add_layer_norm_backend" in given:
            name = add_layer_norm_backend_name(device, dtype)
            module.add_layer_norm_backend = None if name is None else layer_norm.add_layer_norm_backend(name)


BACKEND_ATTRIBUTES = ("attention_backend", "linear_backend", "gelu_backend", "add_layer_norm_backend")


def _choose_again() -> None:
    for model in list(_models):
        _assign(model)


def attention_backend_name(device: torch.device, dtype: torch.dtype, head_size: int) -> str:
    """"avx2" for fp32 CPU weights with a head size that is a multiple of 16 where the kernel runs (1.2-1.3x SDPA's
    CPU flash kernel from 128 tokens), else "sdpa"; what `override` asks for where it applies."""
    kernel_fits = device.type == "cpu" and dtype == torch.float32 and head_size % 16 == 0
    if not ENABLED and _forced_attention != "eager":  # disabled() rules every fast path out, an override's too
        return "sdpa"
    if _forced_attention is not None:
        return _forced_attention if _forced_attention != "avx2" or kernel_fits else "sdpa"
    return "avx2" if kernel_fits and cpu_backend() == "avx2" else "sdpa"


def cpu_backend() -> str | None:
    """The packed GEMM for fp32 CPU inference: "avx2" (avx2.c, built on first use) on an AVX2 CPU where it can run,
    else "onednn" on x86, else None for plain `addmm`; BERTVIZ_LAB_CPU_GEMM picks one for comparisons."""
    global _cpu_backend
    if _cpu_backend is _UNSET:
        _cpu_backend = cpu_gemm_from_environment()
    return _cpu_backend


def wider_vectors_than_avx2() -> bool:
    """Whether PyTorch runs this CPU's own kernels with AVX-512 (or wider): its GEMMs then outrun avx2.c's (on a
    16-core Xeon with AVX-512, avx2.c's GEMM was 0.75x MKL's addmm and its attention 0.87x SDPA)."""
    return torch.backends.cpu.get_cpu_capability() not in ("AVX2", "DEFAULT", "NO AVX")


def cpu_gemm_from_environment() -> str | None:
    """What BERTVIZ_LAB_CPU_GEMM (default auto) picks on this machine: "avx2" where PyTorch's own kernels are
    AVX2 at best, else "onednn", else None; "avx2", "onednn" or "off" asks for one."""
    wanted = os.environ.get("BERTVIZ_LAB_CPU_GEMM", "auto")
    if wanted not in CPU_GEMM_CHOICES:
        raise ValueError(f"BERTVIZ_LAB_CPU_GEMM={wanted!r}: use auto, avx2, onednn or off")
    if wanted == "avx2" or (wanted == "auto" and not wider_vectors_than_avx2()):
        if build.library() is not None:
            return "avx2"
    if wanted in ("auto", "onednn") and ONEDNN_PACKING:
        return "onednn"
    return None


_UNSET = object()
_cpu_backend: str | None | object = _UNSET


def linear_backend_name(device: torch.device, dtype: torch.dtype) -> str | None:
    """The packed GEMM for a linear layer with fp32 CPU weights ("avx2" or "onednn", `cpu_backend()`), else None:
    F.linear (MKL's addmm, cuBLAS)."""
    if not ENABLED or device.type != "cpu" or dtype != torch.float32:
        return None
    return cpu_backend()


def gelu_backend_name(device: torch.device, dtype: torch.dtype, hidden_act: object) -> str | None:
    """Where `gelu(linear(x))` runs as one GEMM with a bias + GELU epilogue: "avx2" (erf form, as exact as
    PyTorch's) for `hidden_act="gelu"` with fp32 CPU weights on the AVX2 GEMM; "cublaslt" on a GPU (tanh form: the
    tanh-GELU activations, and the erf GELU in bf16/fp16 within rounding, |erf - tanh form| < 1e-3); else None."""
    if not ENABLED or not isinstance(hidden_act, str):
        return None
    if device.type == "cpu":
        return "avx2" if hidden_act == "gelu" and dtype == torch.float32 and cpu_backend() == "avx2" else None
    if device.type != "cuda" or not hasattr(torch, "_addmm_activation"):
        return None
    if hidden_act in TANH_GELU_NAMES or (hidden_act == "gelu" and dtype in (torch.bfloat16, torch.float16)):
        return "cublaslt"
    return None


def cpu_reductions(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether the AVX2 reductions over attention (`kernels.entropy`, `kernels.attention_statistics`) run for
    tensors on `device` in `dtype` that autograd does not track: fp32 on the CPU, the fast paths on, the kernels
    built. Elsewhere those functions compute the same numbers in PyTorch."""
    return ENABLED and device.type == "cpu" and dtype == torch.float32 and build.library() is not None


def add_layer_norm_backend_name(device: torch.device, dtype: torch.dtype) -> str | None:
    """"triton" where residual add + LayerNorm may run as one kernel on a GPU (CUDA with Triton installed; the
    backend itself leaves fewer than MIN_FUSED_ELEMENTS activations to PyTorch); "avx2" for fp32 weights on a CPU
    that runs avx2.c's kernels (as GELU); else None."""
    if not ENABLED:
        return None
    if device.type == "cuda":
        return "triton" if triton is not None else None
    return "avx2" if device.type == "cpu" and dtype == torch.float32 and cpu_backend() == "avx2" else None
