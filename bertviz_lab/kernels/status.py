"""status(): which backend a model on this machine is given for attention, linear layers, residual add + LayerNorm,
GELU and the encoder as a whole (once per model, for the device and dtype of its weights: `choice.choose`), and why
not the others (training and autograd always take PyTorch's own, and a layer calls the modules a hook watches)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from bertviz_lab.kernels import build, choice
from bertviz_lab.kernels import compiled as compiled_layers
from bertviz_lab.kernels import linear as linear_kernels

OPERATIONS = ("attention", "linear", "layer_norm", "gelu", "encoder")


@dataclass(frozen=True)
class BackendChoice:
    """One operation on one device: the backend inference runs on, why, and why not each other one."""

    operation: str
    device: str
    backend: str
    why: str
    others: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class KernelStatus:
    """Every operation on the CPU, and on CUDA where there is a GPU; `status()["attention"]` is the CPU row,
    `status()["gelu", "cuda"]` a GPU row."""

    choices: tuple[BackendChoice, ...]

    def __getitem__(self, key: str | tuple[str, str]) -> BackendChoice:
        operation, device = (key, "cpu") if isinstance(key, str) else key
        for row in self.choices:
            if (row.operation, row.device) == (operation, device):
                return row
        known = ", ".join(f"{r.operation!r} on {r.device}" for r in self.choices)
        raise KeyError(f"no status for {operation!r} on {device!r}; there is {known}")

    def __str__(self) -> str:
        lines = []
        for row in self.choices:
            lines.append(f"{row.device:<5} {row.operation:<10} {row.backend:<9} {row.why}")
            lines += [f"{'':<16} not {name}: {reason}" for name, reason in row.others.items()]
        return "\n".join(lines)


def status() -> KernelStatus:
    """What runs where here, decided by the same rules and environment variables as the forward passes."""
    rows = _cpu_rows()
    if torch.cuda.is_available():
        rows += _cuda_rows()
    return KernelStatus(tuple(rows))


def _off_rows(device: str, plain: dict[str, str]) -> list[BackendChoice]:
    reason = "every fast path is off (BERTVIZ_LAB_FUSED_KERNELS=0, or inside kernels.disabled() on this thread)"
    return [BackendChoice(op, device, plain[op], "PyTorch's own", {"fast paths": reason}) for op in OPERATIONS]


def _why_not_avx2() -> str:
    wanted = os.environ.get("BERTVIZ_LAB_CPU_GEMM", "auto")
    if wanted in ("onednn", "mkl", "off"):
        return f"BERTVIZ_LAB_CPU_GEMM={wanted} rules it out"
    if wanted == "auto" and choice.wider_vectors_than_avx2():
        return (f"PyTorch's own kernels use {torch.backends.cpu.get_cpu_capability()} here, faster than avx2.c "
                "(BERTVIZ_LAB_CPU_GEMM=avx2 asks for it)")
    reason = build.unsupported_reason() or build.failure()
    return reason or "the library did not load"


def _why_not_onednn(backend: str | None) -> str:
    if backend == "avx2":
        return "the AVX2 GEMM is faster and comes first"
    if backend == "mkl":
        return (f"takes the products outside {linear_kernels.MKL_MIN_ROWS}-{linear_kernels.MKL_MAX_ROWS} rows, "
                "where MKL's packed GEMM is no faster")
    if not choice.ONEDNN_PACKING:
        return "needs an x86 CPU and a PyTorch with oneDNN's packed linear"
    return f"BERTVIZ_LAB_CPU_GEMM={os.environ.get('BERTVIZ_LAB_CPU_GEMM')} rules it out"


def _encoder_row() -> BackendChoice:
    """The encoder runs layer by layer unless a model asks for its compiled graph (per model, never by default)."""
    missing = compiled_layers.compiler_missing()
    compiled = missing or (f"per model on request: model.set_backend(compiled=True) runs fp32 inference batches of "
                           f"{compiled_layers.MIN_ROWS} tokens or more as one torch.compile graph (compiled at the "
                           "first, 10-25 s), wherever no hook watches the layers")
    return BackendChoice("encoder", "cpu", "eager", "the layers one by one, each on the backends above",
                         {"compiled": compiled})


def _cpu_rows() -> list[BackendChoice]:
    plain = {"attention": "sdpa", "linear": "pytorch", "layer_norm": "pytorch", "gelu": "pytorch", "encoder": "eager"}
    if not choice.current_rules().on:
        return _off_rows("cpu", plain)
    cpu, fp32 = torch.device("cpu"), torch.float32
    backend = choice.linear_backend_name(cpu, fp32)
    on_avx2 = backend == "avx2"
    not_avx2 = {} if on_avx2 else {"avx2": _why_not_avx2()}
    eager = ("the math written out in the model: a layer whose probabilities a hook watches (it sees them and may "
             "replace them), or one set to it (model.set_backend(attention='eager'))")
    if choice.attention_backend_name(cpu, fp32, 64) == "avx2":
        attention = BackendChoice("attention", "cpu", "avx2", "avx2.c's one-pass attention, chosen per model for "
                                  "fp32 weights with a head size that is a multiple of 16; it forms the "
                                  "probabilities in the same pass for a trace", {
                                      "sdpa": "runs autograd, dropout, other dtypes and other head sizes",
                                      "eager": eager})
    else:
        attention = BackendChoice("attention", "cpu", "sdpa", "PyTorch's scaled_dot_product_attention",
                                  {**not_avx2, "eager": eager})
    small = f"autograd, other dtypes and products under {choice.MIN_PACKED_WORK} multiply-adds take addmm"
    if backend is None:
        linear = BackendChoice("linear", "cpu", "pytorch", "addmm (MKL)",
                               {**not_avx2, "onednn": _why_not_onednn(backend)})
    else:
        others = {"onednn": _why_not_onednn(backend)} if on_avx2 else not_avx2
        if backend == "mkl":
            others = {**not_avx2, "onednn": _why_not_onednn(backend)}
        rows = (f" (MKL's sgemm for {linear_kernels.MKL_MIN_ROWS}-{linear_kernels.MKL_MAX_ROWS} rows, oneDNN's "
                f"for the others, addmm above {linear_kernels.MAX_ONEDNN_ROWS})" if backend == "mkl" else "")
        linear = BackendChoice("linear", "cpu", backend, f"a GEMM on packed weights{rows}, given per model for fp32 "
                               f"weights; {small}", others)
    if choice.add_layer_norm_backend_name(cpu, fp32) == "avx2":
        layer_norm = BackendChoice("layer_norm", "cpu", "avx2", "residual add + LayerNorm in one pass of avx2.c, "
                                   "given per model for fp32 weights; autograd and active dropout take nn.LayerNorm",
                                   {"triton": "a GPU kernel"})
    else:
        layer_norm = BackendChoice("layer_norm", "cpu", "pytorch", "nn.LayerNorm after the residual add, as the "
                                   "model writes it", {**not_avx2, "triton": "a GPU kernel"})
    if choice.gelu_backend_name(cpu, fp32, "erf") == "avx2":
        gelu = BackendChoice("gelu", "cpu", "avx2", "GELU (erf form) in the packed GEMM's epilogue, given per model "
                             "whose hidden_act is gelu")
    else:
        gelu = BackendChoice("gelu", "cpu", "pytorch", "PyTorch's GELU after the linear layer", not_avx2)
    return [attention, linear, layer_norm, gelu, _encoder_row()]


def _cuda_rows() -> list[BackendChoice]:
    plain = {"attention": "sdpa", "linear": "pytorch", "layer_norm": "pytorch", "gelu": "pytorch", "encoder": "eager"}
    if not choice.current_rules().on:
        return _off_rows("cuda", plain)
    cpu_only = {"avx2": "a CPU kernel"}
    rows = [BackendChoice("attention", "cuda", "sdpa", "PyTorch's scaled_dot_product_attention (flash or "
                          "memory-efficient)", {**cpu_only, "eager": "the math written out in the model, for a "
                                                "layer whose probabilities a hook watches"}),
            BackendChoice("linear", "cuda", "pytorch", "cuBLAS", {"avx2, onednn": "CPU kernels"})]
    if choice.triton is not None:
        rows.append(BackendChoice("layer_norm", "cuda", "triton", "residual add + LayerNorm in one Triton kernel "
                                  f"from {choice.MIN_FUSED_ELEMENTS} activations; fewer take PyTorch's"))
    else:
        rows.append(BackendChoice("layer_norm", "cuda", "pytorch", "PyTorch's LayerNorm after the residual add",
                                  {"triton": "Triton is not installed"}))
    if hasattr(torch, "_addmm_activation"):
        rows.append(BackendChoice("gelu", "cuda", "cublaslt", "bias + GELU in cuBLASLt's epilogue (tanh form): "
                                  "tanh-GELU activations, and erf GELU in bf16/fp16"))
    else:
        rows.append(BackendChoice("gelu", "cuda", "pytorch", "PyTorch's GELU after the linear layer",
                                  {"cublaslt": "this PyTorch has no torch._addmm_activation"}))
    rows.append(BackendChoice("encoder", "cuda", "eager", "the layers one by one",
                              {"compiled": "the compiled encoder is for the CPU; torch.compile(model) compiles "
                                           "a GPU model whole"}))
    return rows
