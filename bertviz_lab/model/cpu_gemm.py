"""The kernels of cpu_gemm.c (GEMM on packed weights with an optional GELU epilogue, attention): built once with
the system C compiler (about a second), cached, and called through ctypes.

MKL's `addmm`, which PyTorch (and so transformers) calls for every linear layer, is least efficient on the
few-row products of short inputs; PyTorch's CPU attention and GELU leave time on the table too (measured on AMD
EPYC, benchmarks/README.md). The kernels run only where they can share PyTorch's OpenMP threads (Linux, x86-64,
AVX2 + FMA, PyTorch on libgomp) and only once they have built; anywhere else `library()` answers None and the
layers keep PyTorch's own paths.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("cpu_gemm.c")
ABI_VERSION = 5
# -falign-loops=64: where the GEMM's inner loop happens to start moves its speed by ~8% (measured on Zen 3)
FLAGS = ["-O3", "-mavx2", "-mfma", "-falign-loops=64", "-fopenmp", "-fPIC", "-shared", "-std=gnu11", "-lm"]
BUILD_TIMEOUT_S = 120


def cache_dir() -> Path:
    """Where the built library is kept: $BERTVIZ_LAB_CACHE, else the user's cache folder."""
    if os.environ.get("BERTVIZ_LAB_CACHE"):
        return Path(os.environ["BERTVIZ_LAB_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bertviz_lab"


def _compiler() -> list[str]:
    """$CC (which may carry flags, as in `gcc -m64`) or `cc`."""
    return shlex.split(os.environ.get("CC", "cc")) or ["cc"]


def _shares_pytorch_openmp() -> bool:
    """Whether PyTorch runs on libgomp, so that the library's OpenMP threads are PyTorch's own (not a rival pool)."""
    try:
        return "/libgomp" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def unsupported_reason() -> str | None:
    """Why the kernel cannot run in this process, or None when it can."""
    if not sys.platform.startswith("linux") or platform.machine().lower() not in ("x86_64", "amd64"):
        return f"needs Linux on x86-64, not {sys.platform} on {platform.machine()}"
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        return f"needs a CPU with AVX2 and FMA, PyTorch reports {capability}"
    if not _shares_pytorch_openmp():
        return "needs PyTorch built on GNU OpenMP (libgomp)"
    if shutil.which(_compiler()[0]) is None:
        return f"no C compiler ({_compiler()[0]}) to build them"
    return None


def _build(target: Path) -> None:
    """Compile to a temporary name beside `target`, then rename: concurrent builds never see half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        cmd = [*_compiler(), *FLAGS, str(SOURCE), "-o", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"building the AVX2 kernels failed ({' '.join(cmd)}):\n{done.stderr.strip()}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    i64, ptr, c_int = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    for name, restype, argtypes in (
        ("bvl_abi_version", i64, []),
        ("bvl_packed_floats", i64, [i64, i64]),
        ("bvl_pack_weight", None, [ptr, i64, i64, i64, ptr, c_int]),
        ("bvl_linear", c_int, [ptr, i64, i64, i64, ptr, i64, ptr, c_int, ptr, i64, c_int]),
        ("bvl_gelu", None, [ptr, ptr, i64, c_int]),
        ("bvl_attention", c_int, [ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i64, i64, ctypes.c_float,
                                  ptr, ptr, c_int]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    if lib.bvl_abi_version() != ABI_VERSION:
        raise RuntimeError(f"{lib._name} is another build of the AVX2 kernels (ABI {lib.bvl_abi_version()}, "
                           f"expected {ABI_VERSION})")
    return lib


def load(directory: Path | None = None) -> ctypes.CDLL:
    """The kernel built into `directory` (default `cache_dir()`), building it there first if needed."""
    reason = unsupported_reason()
    if reason is not None:
        raise RuntimeError(f"the AVX2 kernels cannot run here: {reason}")
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join(FLAGS).encode()).hexdigest()[:16]
    path = (directory or cache_dir()) / f"cpu_gemm-{digest}.so"
    if not path.exists():
        _build(path)
    return _bind(ctypes.CDLL(str(path)))


@functools.cache
def library() -> ctypes.CDLL | None:
    """The kernel for this process, or None (the reason logged) where it cannot run or did not build."""
    try:
        return load()
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        log.info("bertviz_lab's AVX2 kernels are off, the layers use PyTorch's: %s", error)
        return None


def pack(weight: torch.Tensor) -> torch.Tensor:
    """The (out, in) fp32 weight in the kernel's panel layout, as a flat tensor."""
    lib = library()
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
    failed = library().bvl_linear(rows.data_ptr(), rows.stride(0), rows.shape[0], in_features, packed.data_ptr(),
                                  out_features, None if bias is None else bias.data_ptr(), int(gelu), out.data_ptr(),
                                  out_features, torch.get_num_threads())
    if failed:
        raise MemoryError("cpu_gemm: could not allocate its per-thread scratch")
    return out


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU (erf form) of an fp32 CPU tensor, with the same arithmetic as `linear(gelu=True)`."""
    x = x.contiguous()
    out = torch.empty_like(x)
    library().bvl_gelu(x.data_ptr(), out.data_ptr(), x.numel(), torch.get_num_threads())
    return out


def _strides(x: torch.Tensor) -> ctypes.Array:
    """Batch, head and row strides of a (B, H, rows, cols) view, 0 along broadcast dimensions."""
    return (ctypes.c_int64 * 3)(*(0 if size == 1 else stride for size, stride in zip(x.shape[:3], x.stride()[:3])))


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, mask: torch.Tensor | None, scale: float,
            out: torch.Tensor | None, probs: torch.Tensor | None) -> None:
    B, H, T, D = q.shape
    S = k.shape[2]
    given = [q, k] + [x for x in (v, mask) if x is not None]
    if any(x.dtype != torch.float32 or x.device.type != "cpu" for x in given) or D % 16:
        raise ValueError("cpu_gemm attention needs float32 CPU tensors and a head size that is a multiple of 16, got "
                         f"{', '.join(f'{x.dtype} {x.device.type}' for x in given)} and head size {D}")
    if k.shape != (B, H, S, D) or (v is not None and v.shape != k.shape):
        raise ValueError(f"cpu_gemm attention: q {tuple(q.shape)}, k {tuple(k.shape)} and v "
                         f"{None if v is None else tuple(v.shape)} do not fit (B, H, T|S, D)")
    q, k = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k))
    if v is not None and v.stride(-1) != 1:
        v = v.contiguous()
    if mask is not None:
        mask = mask.expand(B, H, T, S)
        if mask.stride(-1) != 1 and S > 1:
            mask = mask.contiguous()
    failed = library().bvl_attention(
        q.data_ptr(), _strides(q), k.data_ptr(), _strides(k), None if v is None else v.data_ptr(),
        None if v is None else _strides(v), None if mask is None else mask.data_ptr(),
        None if mask is None else _strides(mask), B, H, T, S, D, scale, None if out is None else out.data_ptr(),
        None if probs is None else probs.data_ptr(), torch.get_num_threads())
    if failed:
        raise MemoryError("cpu_gemm: could not allocate attention's per-thread scratch")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
              with_probabilities: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(scale * q @ k.T + mask) @ v for fp32 CPU (B, H, T|S, D) views, D a multiple of 16, mask additive and
    broadcastable to (B, H, T, S); answered as (B, T, H * D), heads merged. `with_probabilities`: also the
    probabilities, (B, H, T, S), from the same pass (for hooks that only read them)."""
    B, H, T, D = q.shape
    out = torch.empty(B, T, H * D, dtype=torch.float32)
    probs = torch.empty(B, H, T, k.shape[2], dtype=torch.float32) if with_probabilities else None
    _attend(q, k, v, mask, scale, out, probs)
    return (out, probs) if with_probabilities else out


def attention_probabilities(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None,
                            scale: float) -> torch.Tensor:
    """softmax(scale * q @ k.T + mask) as (B, H, T, S), for the same inputs as `attention`."""
    B, H, T, _ = q.shape
    probs = torch.empty(B, H, T, k.shape[2], dtype=torch.float32)
    _attend(q, k, None, mask, scale, None, probs)
    return probs
