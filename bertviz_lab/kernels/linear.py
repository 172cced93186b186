"""Linear-layer backends: functions of tensors that `choice.choose` gives a model's layers once, for the device and
dtype of their weights (and, for GELU, the config's `gelu_form`).

`PackedLinear` answers x @ W.T + b from a copy of W packed for a faster CPU GEMM (avx2.c's or oneDNN's); the copies
live here, one per weight, made on first use and made again when the weight changes in place or moves (its data
pointer and version counter), dropped when the weight is freed, moved or trained. `AVX2LinearGELU` and
`CublasLtLinearGELU` answer gelu(x @ W.T + b) with the GELU in the GEMM's epilogue. Each answers None where it does
not apply (autograd, autocast, another dtype, a product too small to gain), and the layer runs its own nn.Linear and
activation: the model's modules stay plain nn.Linear.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F

from bertviz_lab.kernels import avx2
from bertviz_lab.kernels.attention import cpu_inference

# CPU: a packed GEMM wins from about this much work (rows x in x out); smaller products are cheaper through
# addmm's lighter call. oneDNN's wins only up to this many rows; on larger products it lost on some shapes
# (measured on a 2-core AMD EPYC, AVX2; benchmarks/README.md).
MIN_PACKED_WORK = 1 << 20
MAX_ONEDNN_ROWS = 1024
ONEDNN_ROWS_HINT = 1024  # the row count oneDNN chooses the packed layout for
MKL_ROWS_HINT = 128  # the row count MKL's sgemm_pack is told (its layout serves any row count)
MKL_MIN_ROWS, MKL_MAX_ROWS = 96, 256  # the mkl backend hands fewer or more rows to oneDNN's packed GEMM

# id(weight) -> (weak reference to it, data pointer, version, {layout: packed copy}); the layouts are "avx2",
# "onednn" and "mkl" (the mkl backend keeps a oneDNN copy too where it has met few-row products)
_packed: dict[int, tuple[weakref.ref, int, int, dict[str, torch.Tensor]]] = {}


def _pack(data: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "avx2":
        return avx2.pack(data)
    if layout == "mkl":
        return torch.ops.mkl._mkl_reorder_linear_weight(data, MKL_ROWS_HINT)
    return torch.ops.mkldnn._reorder_linear_weight(data, ONEDNN_ROWS_HINT)


def packed_weight(weight: torch.Tensor, layout: str) -> torch.Tensor:
    """`weight` (out, in) in `layout`, packed again only when the weight changed since."""
    key = id(weight)
    entry = _packed.get(key)
    if entry is None or entry[0]() is not weight or entry[1] != weight.data_ptr() or entry[2] != weight._version:
        def forget(_: weakref.ref, key: int = key) -> None:
            _packed.pop(key, None)

        entry = _packed[key] = (weakref.ref(weight, forget), weight.data_ptr(), weight._version, {})
    copies = entry[3]
    if layout not in copies:
        copies[layout] = _pack(weight.detach(), layout)
    return copies[layout]


def has_packed_copy(weight: torch.Tensor) -> str | None:
    """The layouts of the packed copies of `weight` kept ("onednn", "mkl", "mkl+onednn", ...), or None."""
    entry = _packed.get(id(weight))
    return "+".join(sorted(entry[3])) or None if entry is not None and entry[0]() is weight else None


def release(weight: torch.Tensor) -> None:
    """Drop the packed copies of `weight` if they no longer match where and what the weight is (moved, cast)."""
    entry = _packed.get(id(weight))
    if entry is not None and (entry[0]() is not weight or entry[1] != weight.data_ptr() or not weight.is_cpu
                              or weight.dtype != torch.float32):
        del _packed[id(weight)]


def _fp32_cpu_inference(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """No autograd, not inside a torch.compile trace, no CPU autocast, fp32 CPU tensors, a weight with a version
    counter to follow (one made inside inference_mode has none)."""
    return (cpu_inference() and x.dtype is torch.float32 and x.is_cpu and weight.dtype is torch.float32
            and not weight.is_inference())


class PackedLinear:
    """x @ W.T + b for fp32 CPU inference on a packed copy of W: "avx2" (avx2.c), "onednn", or "mkl" (MKL's packed
    sgemm from MKL_MIN_ROWS to MKL_MAX_ROWS rows, a short text's; oneDNN's packed GEMM on the others, where MKL's is
    no faster: 0.7x oneDNN's at 16 rows, even at 512, 0.95x at 1024).

    On the 2-core AMD EPYC we measure on, avx2.c is 1.1-1.9x as fast as MKL's `addmm` on the few-row products of
    short inputs (32-128 rows) and 1.1-1.4x from 512 rows, oneDNN mostly in between (`benchmarks/cpu_gemm.py`). On
    a 2-core Xeon with AVX-512, MKL's packed GEMM made bert-base's forward at 128 rows 1.08-1.14x as fast as
    oneDNN's (weights streamed from memory, as in a model; benchmarks/README.md).
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor | None:
        """x @ weight.T + bias, or None where this backend does not apply (then: F.linear)."""
        if not _fp32_cpu_inference(x, weight):
            if torch.is_grad_enabled() and _packed and not torch.compiler.is_compiling():
                _packed.pop(id(weight), None)  # training: the copy would only hold memory
            return None
        out_features, in_features = weight.shape
        if x.numel() * out_features < MIN_PACKED_WORK:  # rows x in x out multiply-adds
            return None
        if self.name == "avx2":
            return avx2.linear(x, packed_weight(weight, "avx2"), bias, out_features)
        if x.numel() > MAX_ONEDNN_ROWS * in_features or not torch.backends.mkldnn.enabled:
            return None
        if self.name == "mkl" and MKL_MIN_ROWS * in_features <= x.numel() <= MKL_MAX_ROWS * in_features:
            return torch.ops.mkl._mkl_linear(x, packed_weight(weight, "mkl"), weight, bias, MKL_ROWS_HINT)
        return torch.ops.mkldnn._linear_pointwise(x, packed_weight(weight, "onednn"), bias, "none", [], "")

    def __reduce__(self) -> tuple:
        return packed_linear, (self.name,)  # copies and pickles of a model share the one instance

    def __repr__(self) -> str:
        return f"<linear backend {self.name!r}>"


class LinearGELU:
    """gelu(x @ W.T + b) in one pass: `__call__` answers it, or None where the backend does not apply."""

    name = ""

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor | None:
        raise NotImplementedError

    def gelu(self, y: torch.Tensor) -> torch.Tensor | None:
        """GELU of a linear layer's output `y` as `__call__` computes it, or None (then: the layer's activation)."""
        return None

    def __reduce__(self) -> tuple:
        return gelu_backend, (self.name,)  # copies and pickles of a model share the one instance

    def __repr__(self) -> str:
        return f"<linear + GELU backend {self.name!r}>"


class AVX2LinearGELU(LinearGELU):
    """gelu(x @ W.T + b), erf form (as exact as PyTorch's), for fp32 CPU inference: avx2.c's GEMM on the packed
    weight with GELU in its epilogue, or, for a product too small to pack, F.linear and avx2.c's GELU. `gelu`
    alone has the same arithmetic, for a layer whose linear layer is hooked: its output is bit for bit the same."""

    name = "avx2"

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor | None:
        if bias is None or not _fp32_cpu_inference(x, weight):
            return None
        out_features = weight.shape[0]
        if x.numel() * out_features < MIN_PACKED_WORK:
            return avx2.gelu(F.linear(x, weight, bias))
        return avx2.linear(x, packed_weight(weight, "avx2"), bias, out_features, gelu=True)

    def gelu(self, y: torch.Tensor) -> torch.Tensor | None:
        if not cpu_inference() or y.dtype is not torch.float32 or not y.is_cpu:
            return None
        return avx2.gelu(y)


class CublasLtLinearGELU(LinearGELU):
    """gelu(x @ W.T + b), tanh form, as one cuBLASLt GEMM with a bias + GELU epilogue for GPU inference: exact for
    the tanh-GELU activations, and for the erf GELU within rounding in bf16/fp16 (|erf - tanh form| < 1e-3)."""

    name = "cublaslt"

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor | None:
        if (bias is None or not x.is_cuda or x.dtype != weight.dtype or torch.is_grad_enabled()
                or torch.compiler.is_compiling() or torch.is_autocast_enabled()):
            return None
        return cublaslt_linear_gelu(x, weight, bias)  # a hooked layer keeps its own activation (gelu: None)


def cublaslt_linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """gelu(x @ W.T + b) (tanh form) as one cuBLASLt GEMM with a bias + GELU epilogue."""
    y = torch._addmm_activation(bias, x.reshape(-1, x.shape[-1]), weight.t(), use_gelu=True)
    return y.view(*x.shape[:-1], y.shape[-1])


PACKED = {"avx2": PackedLinear("avx2"), "onednn": PackedLinear("onednn"), "mkl": PackedLinear("mkl")}
GELU_BACKENDS: dict[str, LinearGELU] = {"avx2": AVX2LinearGELU(), "cublaslt": CublasLtLinearGELU()}


def packed_linear(name: str) -> PackedLinear:
    """The packed-weight GEMM called `name` ("avx2", "onednn" or "mkl")."""
    return PACKED[name]


def gelu_backend(name: str) -> LinearGELU:
    """The linear + GELU backend called `name`."""
    return GELU_BACKENDS[name]
