"""Every fast path behind one seam. The model calls `attention`, `residual_layer_norm` and `linear_activation`, and
`accelerate` swaps its nn.Linear layers for packed-weight ones; `choice.py` decides per call which backend runs;
`status()` says what runs here and why. Without any of it (BERTVIZ_LAB_FUSED_KERNELS=0, no compiler, no GPU) the
model computes the same function in plain PyTorch."""

from bertviz_lab.kernels.attention import attention
from bertviz_lab.kernels.choice import disabled
from bertviz_lab.kernels.layer_norm import residual_layer_norm
from bertviz_lab.kernels.linear import Linear, accelerate, linear_activation
from bertviz_lab.kernels.status import BackendChoice, KernelStatus, status

__all__ = ["BackendChoice", "KernelStatus", "Linear", "accelerate", "attention", "disabled", "linear_activation",
           "residual_layer_norm", "status", "warm_up"]


def warm_up() -> None:
    """Build (or verify) the CPU kernels now, so that the first forward only computes."""
    from bertviz_lab.kernels.choice import cpu_backend

    cpu_backend()
