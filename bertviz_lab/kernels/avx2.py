"""The AVX2 kernels of avx2.c as PyTorch functions: GEMM on packed weights (with an optional GELU epilogue), GELU,
residual add + LayerNorm, attention, the entropy of its rows and its per-head statistics. Each needs
`build.library()` to have answered a library; `choice.py` decides when they run."""

from __future__ import annotations

import ctypes

import torch
import torch.nn.functional as F

from bertviz_lab.kernels import build
from bertviz_lab.kernels.head_statistics import STATISTICS


def _library() -> ctypes.CDLL:
    """The built kernels; choice.py sends work here only once `build.library()` has answered them."""
    lib = build.library()
    if lib is None:
        raise RuntimeError("bertviz_lab's AVX2 kernels are not available in this process (see "
                           "bertviz_lab.kernels.status()); the layers use PyTorch's where they are off.")
    return lib


def pack(weight: torch.Tensor) -> torch.Tensor:
    """The (out, in) fp32 weight in the kernel's panel layout, as a flat tensor."""
    lib = _library()
    out_features, in_features = weight.shape
    if weight.stride(1) != 1:
        weight = weight.contiguous()
    packed = torch.empty(lib.bvl_packed_floats(out_features, in_features), dtype=torch.float32)
    lib.bvl_pack_weight(weight.data_ptr(), weight.stride(0), out_features, in_features, packed.data_ptr(),
                        torch.get_num_threads())
    return packed


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, out_features: int,
           gelu: bool = False) -> torch.Tensor:
    """x @ W.T + bias for fp32 CPU tensors, W given as `pack(W)`; with `gelu`, GELU (erf form) of that."""
    in_features = x.shape[-1]
    if x.numel() == 0:  # no rows, or nothing to sum: the kernel would write nothing
        out = torch.zeros(*x.shape[:-1], out_features, dtype=torch.float32) + (0 if bias is None else bias)
        return F.gelu(out) if gelu else out
    rows = x.reshape(-1, in_features)
    if rows.stride(-1) != 1 or (rows.shape[0] > 1 and rows.stride(0) < in_features):
        rows = rows.contiguous()
    out = torch.empty(*x.shape[:-1], out_features, dtype=torch.float32)
    failed = _library().bvl_linear(rows.data_ptr(), rows.stride(0), rows.shape[0], in_features, packed.data_ptr(),
                                  out_features, None if bias is None else bias.data_ptr(), int(gelu), out.data_ptr(),
                                  out_features, torch.get_num_threads())
    if failed:
        raise MemoryError("AVX2 kernels: could not allocate its per-thread scratch")
    return out


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU (erf form) of an fp32 CPU tensor, with the same arithmetic as `linear(gelu=True)`."""
    x = x.contiguous()
    out = torch.empty_like(x)
    _library().bvl_gelu(x.data_ptr(), out.data_ptr(), x.numel(), torch.get_num_threads())
    return out


def add_layer_norm(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor,
                   eps: float) -> torch.Tensor:
    """LayerNorm(x + residual) over the last dimension of fp32 CPU tensors, in one pass; residual None: LayerNorm(x)
    with the same arithmetic."""
    width = x.shape[-1]
    rows = x.reshape(-1, width).contiguous()
    added = None if residual is None else residual.reshape(-1, width).contiguous()
    weight, bias = weight.contiguous(), bias.contiguous()
    out = torch.empty_like(rows)
    _library().bvl_add_layer_norm(rows.data_ptr(), None if added is None else added.data_ptr(), rows.shape[0],
                                       width, weight.data_ptr(), bias.data_ptr(), eps, out.data_ptr(),
                                       torch.get_num_threads())
    return out.view(x.shape)


def entropy(p: torch.Tensor) -> torch.Tensor:
    """-sum p ln p over the last dimension of an fp32 CPU tensor (0 ln 0 = 0), shaped as p without it."""
    n = p.shape[-1]
    rows = p.reshape(-1, n)
    if rows.stride(-1) != 1 or (rows.shape[0] > 1 and rows.stride(0) < n):
        rows = rows.contiguous()
    out = torch.empty(rows.shape[0], dtype=torch.float32)
    _library().bvl_entropy(rows.data_ptr(), rows.shape[0], n, rows.stride(0), out.data_ptr(),
                                torch.get_num_threads())
    return out.view(p.shape[:-1])


def _strides(x: torch.Tensor) -> ctypes.Array:
    """Batch, head and row strides of a (B, H, rows, cols) view, 0 along broadcast dimensions."""
    return (ctypes.c_int64 * 3)(*(0 if size == 1 else stride for size, stride in zip(x.shape[:3], x.stride()[:3])))


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, mask: torch.Tensor | None, scale: float,
            out: torch.Tensor | None, probs: torch.Tensor | None,
            statistics: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> None:
    B, H, T, D = q.shape
    S = k.shape[2]
    given = [q, k] + [x for x in (v, mask) if x is not None]
    if any(x.dtype != torch.float32 or x.device.type != "cpu" for x in given) or D % 16:
        raise ValueError("AVX2 attention needs float32 CPU tensors and a head size that is a multiple of 16, got "
                         f"{', '.join(f'{x.dtype} {x.device.type}' for x in given)} and head size {D}")
    if k.shape != (B, H, S, D) or (v is not None and v.shape != k.shape):
        raise ValueError(f"AVX2 attention: q {tuple(q.shape)}, k {tuple(k.shape)} and v "
                         f"{None if v is None else tuple(v.shape)} do not fit (B, H, T|S, D)")
    q, k = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k))
    if v is not None and v.stride(-1) != 1:
        v = v.contiguous()
    if mask is not None:
        mask = mask.expand(B, H, T, S)
        if mask.stride(-1) != 1 and S > 1:
            mask = mask.contiguous()
    failed = _library().bvl_attention(
        q.data_ptr(), _strides(q), k.data_ptr(), _strides(k), None if v is None else v.data_ptr(),
        None if v is None else _strides(v), None if mask is None else mask.data_ptr(),
        None if mask is None else _strides(mask), B, H, T, S, D, scale, None if out is None else out.data_ptr(),
        None if probs is None else probs.data_ptr(), *(None,) * 3 if statistics is None else
        (x.data_ptr() for x in statistics), torch.get_num_threads())
    if failed:
        raise MemoryError("AVX2 kernels: could not allocate attention's per-thread scratch")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
              scale: float) -> torch.Tensor:
    """softmax(scale * q @ k.T + mask) @ v for fp32 CPU (B, H, T|S, D) views, D a multiple of 16, mask additive and
    broadcastable to (B, H, T, S); answered as (B, T, H * D), heads merged."""
    B, H, T, D = q.shape
    out = torch.empty(B, T, H * D, dtype=torch.float32)
    _attend(q, k, v, mask, scale, out, None)
    return out


def attention_probabilities(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None,
                            scale: float) -> torch.Tensor:
    """softmax(scale * q @ k.T + mask) as (B, H, T, S), for the same inputs as `attention`."""
    B, H, T, _ = q.shape
    probs = torch.empty(B, H, T, k.shape[2], dtype=torch.float32)
    _attend(q, k, None, mask, scale, None, probs)
    return probs


def _statistics_inputs(q: torch.Tensor, valid: torch.Tensor, kinds: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """valid (B, S) and kinds (B, S, 3) as the kernels read them: contiguous fp32 (B, S) and (B, 3, S)."""
    B, _, S, _ = q.shape
    if valid.shape != (B, S) or kinds.shape != (B, S, 3) or q.shape[2] != S:
        raise ValueError(f"AVX2 attention statistics: q {tuple(q.shape)}, valid {tuple(valid.shape)} and kinds "
                         f"{tuple(kinds.shape)} do not fit (B, H, S, D), (B, S), (B, S, 3)")
    if any(x.dtype != torch.float32 or x.device.type != "cpu" for x in (valid, kinds)):
        raise ValueError("AVX2 attention statistics need float32 CPU tensors")
    return valid.contiguous(), kinds.transpose(1, 2).contiguous()  # (B, 3, S): each kind's keys in a row


def attention_with_statistics(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                              scale: float, valid: torch.Tensor, kinds: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """`attention(q, k, v, mask, scale)` of a self-attention layer and, from the same pass, its
    (B, H, len(STATISTICS)) float64 statistics (`attention_statistics`: queries weighted by `valid`, keys of
    `kinds`); the mask hides what it hides (valid does not mask keys here)."""
    B, H, T, D = q.shape
    valid, by_kind = _statistics_inputs(q, valid, kinds)
    out = torch.empty(B, T, H * D, dtype=torch.float32)
    blocks = torch.empty(B, H, -(-T // ATTENTION_QUERY_BLOCK), len(STATISTICS), dtype=torch.float64)
    _attend(q, k, v, mask, scale, out, None, (valid, by_kind, blocks))
    return out, blocks.sum(2)


ATTENTION_QUERY_BLOCK = 48  # MQ in avx2.c: the statistics come a block of queries at a time


def attention_statistics(q: torch.Tensor, k: torch.Tensor, valid: torch.Tensor, kinds: torch.Tensor,
                         scale: float) -> torch.Tensor:
    """(B, H, len(STATISTICS)) float64: the statistics of softmax(scale * q @ k.T) in STATISTICS' order (build.py
    checks avx2.c's order at load), keys where `valid` is 0 masked out, summed over the queries weighted by `valid`,
    for fp32 CPU (B, H, S, D) q and k, valid (B, S) and kinds (B, S, 3) (which keys are [CLS], [SEP],
    punctuation); the probabilities are never formed."""
    B, H, S, D = q.shape
    if any(x.dtype != torch.float32 or x.device.type != "cpu" for x in (q, k)) or k.shape != q.shape:
        raise ValueError(f"AVX2 attention statistics need float32 CPU tensors and q, k of one shape, got q "
                         f"{q.dtype} {q.device.type} {tuple(q.shape)}, k {k.dtype} {k.device.type} {tuple(k.shape)}")
    valid, by_kind = _statistics_inputs(q, valid, kinds)
    q, k = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k))
    out = torch.empty(B, H, len(STATISTICS), dtype=torch.float64)
    failed = _library().bvl_attention_statistics(
        q.data_ptr(), _strides(q), k.data_ptr(), _strides(k), valid.data_ptr(), by_kind.data_ptr(), B, H, S, D, scale,
        out.data_ptr(), torch.get_num_threads())
    if failed:
        raise MemoryError("AVX2 kernels: could not allocate the statistics' per-thread scratch")
    return out
