"""Every fast path behind one seam: backends, functions of tensors, that `choose` gives a model's layers once per
device and dtype (when it is built or moved; attention.py, linear.py, layer_norm.py): attention (with the per-head
statistics a corpus analysis asks for beside its output), the packed CPU GEMM for linear layers, GELU in the GEMM's
epilogue, residual add + LayerNorm, and for a model that asks, its encoder's layers as one torch.compile graph
(compiled.py); `entropy` of attention rows and `attention_statistics` of queries and keys (statistics.py) for
statistics over many maps. The layers keep their plain modules and math as the reference and call a backend where
they were given one. `choice.py` holds every rule, per model: `set_backend(model, ...)`, `override(model, ...)` and
`disabled(model)` change one model and no other; `status()` says what runs here and why; `machine` names the CPU
and what it computes natively. Without any of it (BERTVIZ_LAB_FUSED_KERNELS=0, no compiler, no GPU) the model
computes the same function in plain PyTorch."""

from bertviz_lab.kernels.attention import AttentionBackend
from bertviz_lab.kernels.choice import Rules, choose, disabled, override, rules_of, set_backend
from bertviz_lab.kernels.compiled import CompiledLayers
from bertviz_lab.kernels.entropy import entropy
from bertviz_lab.kernels.layer_norm import AddLayerNorm, TritonAddLayerNorm
from bertviz_lab.kernels.linear import LinearGELU, PackedLinear
from bertviz_lab.kernels.statistics import attention_statistics, probability_statistics
from bertviz_lab.kernels.status import BackendChoice, KernelStatus, status

__all__ = ["AddLayerNorm", "AttentionBackend", "BackendChoice", "CompiledLayers", "KernelStatus", "LinearGELU",
           "PackedLinear", "Rules", "TritonAddLayerNorm", "attention_backends", "attention_statistics", "choose",
           "disabled", "entropy", "override", "probability_statistics", "rules_of", "set_backend", "status",
           "warm_up"]


def attention_backends() -> list[str]:
    """The attention backends this machine can run: "eager" and "sdpa" everywhere, "avx2" where the kernel builds."""
    from bertviz_lab.kernels import build

    return ["eager", "sdpa"] + (["avx2"] if build.library() is not None else [])


def warm_up() -> None:
    """Build (or verify) the CPU kernels now, so that the first forward only computes."""
    from bertviz_lab.kernels.choice import cpu_backend

    cpu_backend()
