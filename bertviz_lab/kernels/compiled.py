"""The encoder's layers as one `torch.compile` graph (inductor, dynamic shapes) for large fp32 CPU inference batches,
for a model that asks for it (`model.set_backend(compiled=True)`).

Inductor fuses what the eager layers run as separate passes over memory (bias, GELU, residual add + LayerNorm,
the head reshapes) around the same GEMMs and SDPA: bert-base 8 x 128 ran 1.08-1.17x the eager layers on a 2-core
AVX-512 Xeon (benchmarks/README.md). Below MIN_ROWS tokens a batch stays on the eager layers, whose packed GEMMs are
as fast there, so a short text (a figure, a panel) never waits for a compile.

Compiling takes 20-25 s on two cores the first time and about 9 s in a later process (inductor's cache on disk);
one graph with dynamic batch and length then serves every batch of two texts or more, and every model of the same
architecture (a batch of one text compiles one more; past dynamo's recompile limit, 8 architectures in a process,
the layers run eagerly under dynamo). The weights stay graph inputs (no freezing):
a model trained or edited in place gives its new output at once. The graph computes the plain layers' math, within
about 1e-6 of the eager path, not bit for bit. Where it does not apply (autograd, CPU autocast, another dtype or
device, fewer rows, inside another compiled graph) or the compile fails (one warning, then eager for good), the
backend answers None and the layers run eagerly; the model itself keeps it off wherever a hook could watch a layer.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from bertviz_lab.kernels.attention import cpu_inference

MIN_ROWS = 512  # batch x tokens from which the graph runs (bert-base: 1.02-1.05x the eager layers at 512 rows)


def compiler_missing() -> str | None:
    """Why inductor cannot build its CPU code here, or None: it runs $CXX, else g++ (clang++ on macOS)."""
    compiler = os.environ.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")
    if shutil.which(compiler) is None:
        return f"torch.compile's CPU code needs a C++ compiler and there is none ({compiler} not found; set CXX)"
    return None


def _run_layers(layers: nn.ModuleList, hidden_states: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    for layer in layers:
        hidden_states = layer(hidden_states, mask)
    return hidden_states


_failures: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()  # layers -> why


def failure(layers: nn.Module) -> str | None:
    """Why compiling these layers failed (they then run eagerly for good, whatever backend object a later move or
    override gives the model), or None."""
    return _failures.get(layers)


class CompiledLayers:
    """A model's encoder layers as a compiled graph, compiled at the first batch it applies to."""

    def __init__(self) -> None:
        self._graph: Callable[..., torch.Tensor] | None = None

    @staticmethod
    def applies(hidden_states: torch.Tensor) -> bool:
        """fp32 CPU inference (no autograd, no autocast, not inside another graph) of at least MIN_ROWS tokens."""
        return (hidden_states.device.type == "cpu" and hidden_states.dtype == torch.float32
                and hidden_states.dim() == 3 and hidden_states.shape[0] * hidden_states.shape[1] >= MIN_ROWS
                and cpu_inference())

    def __call__(self, layers: nn.ModuleList, hidden_states: torch.Tensor,
                 mask: torch.Tensor | None) -> torch.Tensor | None:
        """The layers' output, or None where the graph does not apply."""
        if not self.applies(hidden_states) or layers in _failures:
            return None
        if self._graph is None:  # compiled at its first call (dynamo compiles one frame at a time)
            self._graph = torch.compile(_run_layers, dynamic=True)
        try:
            return self._graph(layers, hidden_states, mask)
        except Exception as error:  # inductor's failures come as many types; the eager layers still answer
            _failures[layers] = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
            warnings.warn(f"the compiled encoder failed, so this model's layers run eagerly from now on "
                          f"({_failures[layers]})", RuntimeWarning, stacklevel=2)
            return None

    def __reduce__(self) -> tuple[Any, ...]:
        return (CompiledLayers, ())  # a copied model compiles its own graph

    def __repr__(self) -> str:
        return "CompiledLayers()"
