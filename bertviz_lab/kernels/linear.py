"""Linear layers on packed weights for fp32 CPU inference, and a linear layer with its GELU in the epilogue."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from bertviz_lab.kernels import avx2, choice

ONEDNN_ROWS_HINT = 1024  # the row count oneDNN chooses the packed layout for


class Linear(nn.Linear):
    """nn.Linear whose fp32 CPU inference runs a faster GEMM on a copy of its weight packed for it.

    On the 2-core AMD EPYC we measure on, avx2.c is 1.1-1.9x as fast as MKL's `addmm` on the few-row products of
    short inputs (32-128 rows) and 1.1-1.4x from 512 rows, oneDNN mostly in between (`benchmarks/cpu_gemm.py`).
    The packed copy, as large as the weight, is made on the first such call, rebuilt when the weight changes in
    place or moves, and dropped when the layer runs with autograd or its weight leaves the CPU or fp32. Weights
    created inside `torch.inference_mode()` have no version counter to follow and stay on the plain path. To hooks,
    checkpoints and traces it is an nn.Linear named Linear; `accelerate` turns a model's nn.Linear into these.
    """

    packs_weights = True
    _packed: tuple[str, int, int, torch.Tensor] | None = None  # (backend, weight data_ptr, version, packed weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight  # one module attribute lookup: this runs for every layer of a short forward
        backend = choice.linear_backend(x, weight)
        if backend == "avx2":
            return avx2.linear(x, self.packed_weight(backend), self.bias, self.out_features)
        if backend == "onednn":
            return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight(backend), self.bias, "none", [], "")
        if self._packed is not None and not torch.compiler.is_compiling() and (
                torch.is_grad_enabled() or weight.device.type != "cpu" or weight.dtype != torch.float32):
            self._packed = None  # training, or the weight moved: the copy would only hold memory
        return F.linear(x, weight, self.bias)

    def packed_weight(self, backend: str) -> torch.Tensor:
        """The weight in `backend`'s layout, packed again only when the weight changed."""
        weight, packed = self.weight, self._packed
        if (packed is None or packed[0] != backend or packed[1] != weight.data_ptr()
                or packed[2] != weight._version):
            data = weight.detach()
            copy = (avx2.pack(data) if backend == "avx2"
                    else torch.ops.mkldnn._reorder_linear_weight(data, ONEDNN_ROWS_HINT))
            packed = self._packed = (backend, data.data_ptr(), weight._version, copy)
        return packed[3]

    def __getstate__(self) -> dict:
        """Copies and pickles leave the packed weight out (oneDNN tensors have no storage to copy)."""
        state = super().__getstate__()
        state.pop("_packed", None)
        return state


def accelerate(model: nn.Module) -> nn.Module:
    """Turn every plain nn.Linear of `model` into a `Linear` in place (same parameters, same names, same state
    dict), so that fp32 CPU inference runs on packed weights; the model's files keep writing nn.Linear."""
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = Linear
    return model


def linear_activation(x: torch.Tensor, linear: nn.Linear, activation: Callable[[torch.Tensor], torch.Tensor],
                      activation_name: str | None) -> torch.Tensor:
    """activation(linear(x)); GELU in the GEMM's epilogue where `choice.linear_gelu_backend` allows.

    On the CPU a hooked layer runs first (its hooks see, and may change, the output before GELU), then the same
    GELU arithmetic in a second pass: a trace that only watches leaves every output bit for bit as it was.
    """
    backend = choice.linear_gelu_backend(x, linear, activation_name)
    if backend == "avx2":
        if not choice.unhooked(linear):
            return avx2.gelu(linear(x))
        return avx2.linear(x, linear.packed_weight("avx2"), linear.bias, linear.out_features, gelu=True)
    if backend == "cublaslt":
        return cublaslt_linear_gelu(x, linear)
    return activation(linear(x))


def cublaslt_linear_gelu(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    """gelu(x @ W.T + b) (tanh form) as one cuBLASLt GEMM with a bias + GELU epilogue."""
    y = torch._addmm_activation(linear.bias, x.reshape(-1, x.shape[-1]), linear.weight.t(), use_gelu=True)
    return y.view(*x.shape[:-1], y.shape[-1])
