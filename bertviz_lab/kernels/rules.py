"""The rules a model's layers are given backends by (`Rules`), the rules of the block a thread is in, and the one
rule for the reductions over attention; kept apart from choice.py, which gives the backends, so that the functions
of tensors (statistics.py, entropy.py) can ask it without importing the backends."""

from __future__ import annotations

import contextvars
import dataclasses
import os

import torch

from bertviz_lab.kernels import build

ENABLED = os.environ.get("BERTVIZ_LAB_FUSED_KERNELS", "1") != "0"


@dataclasses.dataclass(frozen=True)
class Rules:
    """How a model's layers are given backends: `attention` ("eager", "sdpa" or "avx2") and `cpu_gemm` ("avx2",
    "onednn", "mkl" or "off") ask for one (None: what this machine runs best); `compiled=True` runs large fp32 CPU
    inference batches through one torch.compile graph of the encoder (compiled.py); `fast=False` gives every layer
    plain PyTorch."""

    attention: str | None = None
    cpu_gemm: str | None = None
    fast: bool = True
    compiled: bool = False

    @property
    def on(self) -> bool:
        """Whether any fast path may run under these rules (BERTVIZ_LAB_FUSED_KERNELS=0 rules out every one)."""
        return ENABLED and self.fast


block_rules: contextvars.ContextVar[Rules] = contextvars.ContextVar("kernel_rules", default=Rules())


def current_rules() -> Rules:
    """The rules of the block this thread is in (override or disabled without a model), else the defaults."""
    return block_rules.get()


def cpu_reductions(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether the AVX2 reductions over attention (`kernels.entropy`, `kernels.attention_statistics`) run for
    tensors on `device` in `dtype` that autograd does not track: fp32 on the CPU, the fast paths on (and not inside
    `disabled()` on this thread), the kernels built. Elsewhere those functions compute the same numbers in PyTorch."""
    return current_rules().on and device.type == "cpu" and dtype == torch.float32 and build.library() is not None
