"""Every fast path behind one seam. Each attention layer is given its backend once (`choose`, when a model is
built or moved; `attention.py`), the model calls `residual_layer_norm` and `linear_activation`, and `accelerate`
swaps its nn.Linear layers for packed-weight ones; `choice.py` holds every rule; `status()` says what runs here and
why; `override(...)` and `disabled()` pick for a block. Without any of it (BERTVIZ_LAB_FUSED_KERNELS=0, no
compiler, no GPU) the model computes the same function in plain PyTorch."""

from bertviz_lab.kernels.attention import AttentionBackend
from bertviz_lab.kernels.choice import choose, disabled, override
from bertviz_lab.kernels.layer_norm import residual_layer_norm
from bertviz_lab.kernels.linear import Linear, accelerate, linear_activation
from bertviz_lab.kernels.status import BackendChoice, KernelStatus, status

__all__ = ["AttentionBackend", "BackendChoice", "KernelStatus", "Linear", "accelerate", "attention_backends",
           "choose", "disabled", "linear_activation", "override", "residual_layer_norm", "status", "warm_up"]


def attention_backends() -> list[str]:
    """The attention backends this machine can run: "eager" and "sdpa" everywhere, "avx2" where the kernel builds."""
    from bertviz_lab.kernels import build

    return ["eager", "sdpa"] + (["avx2"] if build.library() is not None else [])


def warm_up() -> None:
    """Build (or verify) the CPU kernels now, so that the first forward only computes."""
    from bertviz_lab.kernels.choice import cpu_backend

    cpu_backend()
