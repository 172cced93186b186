"""The one place that decides which backend runs attention, a linear layer, residual add + LayerNorm and the
first feed-forward layer's GELU, and where the reductions over attention run on the AVX2 kernels; every rule the
fast paths obey is here.

Each is chosen per model (`choose`: when a model is built or moved), from the device and dtype of a layer's weights,
its head size, the config's `gelu_form` and the model's Rules, and given to the layer as a function of tensors
(attention.py, linear.py, layer_norm.py); None leaves the layer its plain modules and math. A backend computes the
same function as those and answers only where it is faster and nobody could tell it apart (inference: no autograd,
no active dropout, not inside a torch.compile trace); the layer runs the plain path wherever a hook watches it.
A model that asks for it (`compiled=True`) also gets its encoder's layers as one torch.compile graph for large
batches (compiled.py), which agrees with the eager layers to about 1e-6 rather than bit for bit.

A model's Rules are its own: `set_backend(model, ...)` for good, `override(model, ...)` and `disabled(model)` for a
block; no call changes another model, so a model training on another thread is never rewired. Without a model,
`override(...)` and `disabled()` set the rules of the models built or moved inside the block on this thread (they
keep them), and `disabled()` runs the reductions over attention in PyTorch there. BERTVIZ_LAB_FUSED_KERNELS=0 turns
every fast path off for the process; BERTVIZ_LAB_CPU_GEMM=auto|avx2|onednn|mkl|off picks the CPU's packed GEMM.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
from typing import Any, Iterator

import torch
from torch import nn

from bertviz_lab.kernels import attention, build, layer_norm, linear
from bertviz_lab.kernels import compiled as compiled_layers
from bertviz_lab.kernels.layer_norm import MIN_FUSED_ELEMENTS, triton
from bertviz_lab.kernels.linear import MIN_PACKED_WORK
from bertviz_lab.kernels.rules import ENABLED, Rules, block_rules, cpu_reductions, current_rules

__all__ = ["ENABLED", "MIN_FUSED_ELEMENTS", "MIN_PACKED_WORK", "Rules", "choose", "cpu_backend", "cpu_reductions",
           "current_rules", "disabled", "override", "rules_of", "set_backend", "triton"]

CPU_GEMM_CHOICES = ("auto", "avx2", "onednn", "mkl", "off")  # BERTVIZ_LAB_CPU_GEMM
ONEDNN_PACKING = (platform.machine().lower() in ("x86_64", "amd64") and torch.backends.mkldnn.is_available()
                  and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))
# MKL's packed sgemm (few-row products go to oneDNN's, so it needs both)
MKL_PACKING = (ONEDNN_PACKING and torch.backends.mkl.is_available()
               and hasattr(torch.ops.mkl, "_mkl_reorder_linear_weight"))
_ATTENTION_NAMES = tuple(attention.BACKENDS)
AUTO = "auto"


def _checked(rules: Rules, attention: str | None, cpu_gemm: str | None, fast: bool | None,
             compiled: bool | None = None) -> Rules:
    """`rules` with the given changes ("auto": back to this machine's choice); a backend this machine cannot run
    is an error saying why."""
    if attention is not None and attention != AUTO and attention not in _ATTENTION_NAMES:
        raise ValueError(f"attention={attention!r}: use one of {', '.join(_ATTENTION_NAMES)} or 'auto'.")
    if cpu_gemm is not None and cpu_gemm != AUTO and cpu_gemm not in CPU_GEMM_CHOICES[1:]:
        raise ValueError(f"cpu_gemm={cpu_gemm!r}: use avx2, onednn, mkl, off or 'auto'.")
    if "avx2" in (attention, cpu_gemm) and build.library() is None:
        raise ValueError(f"the AVX2 kernels cannot run here: {build.unsupported_reason() or build.failure()}")
    if cpu_gemm == "onednn" and not ONEDNN_PACKING:
        raise ValueError("oneDNN's packed GEMM needs an x86 CPU and a PyTorch with oneDNN's packed linear.")
    if cpu_gemm == "mkl" and not MKL_PACKING:
        raise ValueError("MKL's packed GEMM needs an x86 CPU and a PyTorch built with MKL and oneDNN.")
    if compiled:
        missing = compiled_layers.compiler_missing()
        if missing is not None:
            raise ValueError(f"compiled=True cannot run here: {missing}.")
    changes: dict[str, Any] = {}
    if compiled is not None:
        changes["compiled"] = bool(compiled)
    if attention is not None:
        changes["attention"] = None if attention == AUTO else attention
    if cpu_gemm is not None:
        changes["cpu_gemm"] = None if cpu_gemm == AUTO else cpu_gemm
    if fast is not None:
        changes["fast"] = bool(fast)
    return dataclasses.replace(rules, **changes)


def rules_of(model: nn.Module) -> Rules:
    """The rules `model` is given backends by: its own (set_backend, override on it), else those of the block it
    is in on this thread."""
    own = getattr(model, "_kernel_rules", None)
    return own if own is not None else block_rules.get()


def _ruled(model: nn.Module) -> list[nn.Module]:
    """The model and every model inside it: each keeps its rules (a task model's backbone moved on its own)."""
    return [module for module in model.modules() if module is model or hasattr(module, "config")]


def _keep_rules(model: nn.Module, rules: Rules) -> None:
    """The rules go with the model and every model inside it."""
    for module in _ruled(model):
        object.__setattr__(module, "_kernel_rules", rules)


def set_backend(model: nn.Module, *, attention: str | None = None, cpu_gemm: str | None = None,
                fast: bool | None = None, compiled: bool | None = None) -> None:
    """From now on `model` (and only it) runs `attention` ("eager", "sdpa", "avx2") and the CPU GEMM `cpu_gemm`
    ("avx2", "onednn", "mkl", "off"), "auto" for this machine's choice; `compiled=True` its encoder as one
    torch.compile graph for fp32 CPU inference batches of at least compiled.MIN_ROWS tokens (compiled at the first
    one); `fast=False` plain PyTorch in every layer."""
    _keep_rules(model, _checked(rules_of(model), attention, cpu_gemm, fast, compiled))
    choose(model)


@contextlib.contextmanager
def override(model: nn.Module | None = None, *, attention: str | None = None,
             cpu_gemm: str | None = None, compiled: bool | None = None) -> Iterator[None]:
    """Inside the block `model` runs `attention` ("eager", "sdpa" or "avx2"; a layer the kernel cannot run keeps
    SDPA), the linear layers `cpu_gemm` ("avx2", "onednn", "mkl" or "off") and, with `compiled`, its encoder as a
    compiled graph or not; its rules as before on exit, also after an error. Without a model: the rules of the
    models built or moved inside the block on this thread. Asking for a backend this machine cannot run is an error
    saying why."""
    with _rules_for(model, attention=attention, cpu_gemm=cpu_gemm, compiled=compiled):
        yield


@contextlib.contextmanager
def disabled(model: nn.Module | None = None) -> Iterator[None]:
    """Plain PyTorch inside the block (to compare against, or to rule the fast paths out): for `model`'s layers,
    or, without a model, for the models built or moved inside the block and the reductions over attention on this
    thread."""
    with _rules_for(model, fast=False):
        yield


@contextlib.contextmanager
def _rules_for(model: nn.Module | None, **changes: Any) -> Iterator[None]:
    if model is None:
        token = block_rules.set(_checked(block_rules.get(), changes.get("attention"), changes.get("cpu_gemm"),
                                          changes.get("fast"), changes.get("compiled")))
        try:
            yield
        finally:
            block_rules.reset(token)
        return
    before = {module: getattr(module, "_kernel_rules", None) for module in _ruled(model)}
    _keep_rules(model, _checked(rules_of(model), changes.get("attention"), changes.get("cpu_gemm"),
                                changes.get("fast"), changes.get("compiled")))
    choose(model)
    try:
        yield
    finally:
        for module, rules in before.items():  # each its own, an inner model's set_backend included
            object.__setattr__(module, "_kernel_rules", rules)
        choose(model)


def choose(model: nn.Module) -> None:
    """Give every layer of `model` its backends for the device and dtype of its weights now, under the model's
    rules: attention to modules with `attention_backend` (and `head_size`), the packed GEMM to those with
    `linear_backend`, GELU in the GEMM's epilogue to those with `gelu_backend` (from `model.config.gelu_form`) and
    residual add + LayerNorm to those with `add_layer_norm_backend`; called when a model is built or moved. Packed
    weight copies that no longer match their weight are dropped. A model built inside an override or disabled block
    keeps that block's rules; a model inside it with rules of its own (a backbone's set_backend) keeps them."""
    rules = rules_of(model)
    if getattr(model, "_kernel_rules", None) is None and rules != Rules():
        _keep_rules(model, rules)
    for parameter in model.parameters():
        linear.release(parameter)
    gelu_form = getattr(getattr(model, "config", None), "gelu_form", None)
    ruled = {"": rules}  # module name -> the rules of a model inside this one that has its own
    for name, module in model.named_modules():
        own = getattr(module, "_kernel_rules", None)
        if name and own is not None and hasattr(module, "config"):
            ruled[name] = own
    for name, module in model.named_modules():
        given = vars(module)
        if not any(attribute in given for attribute in BACKEND_ATTRIBUTES):
            continue
        rules = ruled[max((owner for owner in ruled if not owner or name.startswith(owner + ".")), key=len)]
        weight = next(module.parameters(), None)
        device, dtype = (torch.device("cpu"), torch.float32) if weight is None else (weight.device, weight.dtype)
        if "attention_backend" in given and hasattr(module, "head_size"):
            name = "sdpa" if weight is None else attention_backend_name(device, dtype, module.head_size, rules)
            module.attention_backend = attention.BACKENDS[name]
        if "linear_backend" in given:
            name = linear_backend_name(device, dtype, rules)
            module.linear_backend = None if name is None else linear.packed_linear(name)
        if "gelu_backend" in given:
            name = gelu_backend_name(device, dtype, gelu_form, rules)
            module.gelu_backend = None if name is None else linear.gelu_backend(name)
        if "add_layer_norm_backend" in given:
            name = add_layer_norm_backend_name(device, dtype, rules)
            module.add_layer_norm_backend = None if name is None else layer_norm.add_layer_norm_backend(name)
        if "compiled_backend" in given:
            runs = rules.on and rules.compiled and device.type == "cpu" and dtype == torch.float32
            kept = module.compiled_backend  # keeps its compiled graph
            module.compiled_backend = (kept or compiled_layers.CompiledLayers()) if runs else None


GELU_FORMS = ("erf", "tanh")  # what a config's `gelu_form` may say
BACKEND_ATTRIBUTES = ("attention_backend", "linear_backend", "gelu_backend", "add_layer_norm_backend",
                      "compiled_backend")


def attention_backend_name(device: torch.device, dtype: torch.dtype, head_size: int,
                           rules: Rules | None = None) -> str:
    """"avx2" for fp32 CPU weights with a head size that is a multiple of 16 where the kernel runs (1.2-1.3x SDPA's
    CPU flash kernel from 128 tokens on AVX2 CPUs), else "sdpa"; what the rules ask for where it applies."""
    rules = block_rules.get() if rules is None else rules
    kernel_fits = device.type == "cpu" and dtype == torch.float32 and head_size % 16 == 0
    if not rules.on and rules.attention != "eager":  # plain PyTorch rules every fast path out
        return "sdpa"
    if rules.attention is not None:
        return rules.attention if rules.attention != "avx2" or kernel_fits else "sdpa"
    return "avx2" if kernel_fits and cpu_backend(rules) == "avx2" else "sdpa"


def cpu_backend(rules: Rules | None = None) -> str | None:
    """The packed GEMM for fp32 CPU inference: "avx2" (avx2.c, built on first use) on an AVX2 CPU where it can run,
    "mkl" (MKL's packed sgemm for a short text's rows, oneDNN's for others) on a CPU with wider vectors, else
    "onednn" on x86, else None
    for plain `addmm`; BERTVIZ_LAB_CPU_GEMM, or the rules' cpu_gemm, picks one."""
    global _cpu_backend
    rules = block_rules.get() if rules is None else rules
    if rules.cpu_gemm is not None:
        return None if rules.cpu_gemm == "off" else rules.cpu_gemm
    if _cpu_backend is _UNSET:
        _cpu_backend = cpu_gemm_from_environment()
    return _cpu_backend  # type: ignore[return-value]


def wider_vectors_than_avx2() -> bool:
    """Whether PyTorch runs this CPU's own kernels with AVX-512 (or wider): its GEMMs then outrun avx2.c's (on a
    16-core Xeon with AVX-512, avx2.c's GEMM was 0.75x MKL's addmm and its attention 0.87x SDPA)."""
    return torch.backends.cpu.get_cpu_capability() not in ("AVX2", "DEFAULT", "NO AVX")


def cpu_gemm_from_environment() -> str | None:
    """What BERTVIZ_LAB_CPU_GEMM (default auto) picks on this machine: "avx2" where PyTorch's own kernels are
    AVX2 at best, else "mkl", else "onednn", else None; "avx2", "onednn", "mkl" or "off" asks for one."""
    wanted = os.environ.get("BERTVIZ_LAB_CPU_GEMM", "auto")
    if wanted not in CPU_GEMM_CHOICES:
        raise ValueError(f"BERTVIZ_LAB_CPU_GEMM={wanted!r}: use auto, avx2, onednn, mkl or off")
    wider = wider_vectors_than_avx2()
    if wanted == "avx2" or (wanted == "auto" and not wider):
        if build.library() is not None:
            return "avx2"
    if wanted in ("auto", "mkl") and (wider or wanted == "mkl") and MKL_PACKING:
        return "mkl"
    if wanted in ("auto", "onednn") and ONEDNN_PACKING:
        return "onednn"
    return None


_UNSET = object()
_cpu_backend: str | None | object = _UNSET


def linear_backend_name(device: torch.device, dtype: torch.dtype, rules: Rules | None = None) -> str | None:
    """The packed GEMM for a linear layer with fp32 CPU weights ("avx2" or "onednn", `cpu_backend()`), else None:
    F.linear (MKL's addmm, cuBLAS)."""
    rules = block_rules.get() if rules is None else rules
    if not rules.on or device.type != "cpu" or dtype != torch.float32:
        return None
    return cpu_backend(rules)


def gelu_backend_name(device: torch.device, dtype: torch.dtype, gelu_form: str | None,
                      rules: Rules | None = None) -> str | None:
    """Where `gelu(linear(x))` runs as one GEMM with a bias + GELU epilogue, for a model whose activation is GELU
    in `gelu_form` ("erf" or "tanh"; None for any other activation, as the model's config says): "avx2" (erf form,
    as exact as PyTorch's) with fp32 CPU weights on the AVX2 GEMM; "cublaslt" on a GPU (tanh form: the tanh GELU,
    and the erf GELU in bf16/fp16 within rounding, |erf - tanh form| < 1e-3); else None."""
    rules = block_rules.get() if rules is None else rules
    if not rules.on or gelu_form not in GELU_FORMS:
        return None
    if device.type == "cpu":
        return "avx2" if gelu_form == "erf" and dtype == torch.float32 and cpu_backend(rules) == "avx2" else None
    if device.type != "cuda" or not hasattr(torch, "_addmm_activation"):
        return None
    if gelu_form == "tanh" or dtype in (torch.bfloat16, torch.float16):
        return "cublaslt"
    return None


def add_layer_norm_backend_name(device: torch.device, dtype: torch.dtype, rules: Rules | None = None) -> str | None:
    """"triton" where residual add + LayerNorm may run as one kernel on a GPU (CUDA with Triton installed; the
    backend itself leaves fewer than MIN_FUSED_ELEMENTS activations to PyTorch); "avx2" for fp32 weights on a CPU
    that runs avx2.c's kernels (as GELU); else None."""
    rules = block_rules.get() if rules is None else rules
    if not rules.on:
        return None
    if device.type == "cuda":
        return "triton" if triton is not None else None
    return "avx2" if device.type == "cpu" and dtype == torch.float32 and cpu_backend(rules) == "avx2" else None
