"""What this machine's processor offers PyTorch: its name, the vector instruction set PyTorch's own kernels run
with, and whether it computes bf16 natively (AVX-512 BF16 or AMX on x86, BF16 on Arm). Benchmarks print it, so a
number names the CPU it was measured on, and bf16 options check it: bf16 emulated in fp32 is slower than fp32."""

from __future__ import annotations

import contextlib
import functools
import platform
import subprocess

import torch

BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo's names, the faster first
USE_FP32 = "use fp32 (precision='fp32', or --precision fp32)"


@functools.cache
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    break
                name, _, value = line.partition(":")
                fields.setdefault(name.strip(), value.strip())
    return fields


def cpu_name() -> str:
    """The CPU's model name ("Intel(R) Xeon(R) Processor"), or the platform's guess."""
    info = _cpuinfo()
    if "model name" in info:
        return info["model name"]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        if platform.system() == "Darwin":
            return subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                  timeout=5).stdout.strip() or platform.processor()
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (empty elsewhere)."""
    info = _cpuinfo()
    return frozenset((info.get("flags") or info.get("Features") or "").split())


def isa() -> str:
    """The vector instruction set PyTorch's CPU kernels use here ("AVX512", "AVX2", "DEFAULT", ...)."""
    return torch.backends.cpu.get_cpu_capability()


@functools.cache
def native_bf16() -> str | None:
    """How this CPU computes bf16 natively ("amx_bf16", "avx512_bf16", "arm bf16"), None where it has no way."""
    flags = cpu_flags()
    for flag in BF16_FLAGS:
        if flag in flags:
            return flag
    if "bf16" in flags:  # Arm's Linux name (FEAT_BF16)
        return "arm bf16"
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            answer = subprocess.run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True,
                                    timeout=5).stdout.strip()
            if answer == "1":
                return "arm bf16"
    return None


def bf16_refusal(device: torch.device | str) -> str | None:
    """Why bf16 cannot run natively on `device` (one line), or None where it can."""
    device = torch.device(device)
    if device.type == "cpu":
        if native_bf16() is None:
            return (f"bf16 needs a CPU that computes it natively (AVX-512 BF16 or AMX on x86, BF16 on Arm); this "
                    f"{cpu_name()} has none, and emulated bf16 is slower than fp32: {USE_FP32}.")
        return None
    if device.type == "cuda":
        return None if torch.cuda.is_bf16_supported() else (
            f"bf16 needs a GPU of compute capability 8.0 or more; {torch.cuda.get_device_name(device)} has none: "
            f"{USE_FP32}.")
    return f"bf16 runs on a CPU or a CUDA GPU here, not on {device.type}: {USE_FP32}."


def bf16_caution(device: torch.device | str) -> str | None:
    """Where bf16 runs natively but is not expected to be faster than fp32 (AVX-512 BF16 without AMX: PyTorch's
    bf16 GEMMs measured 0.6-0.8x its fp32 ones on such a Xeon), one line saying so; else None."""
    if torch.device(device).type == "cpu" and native_bf16() == "avx512_bf16":
        return (f"this {cpu_name()} computes bf16 with AVX-512 BF16 but has no AMX: PyTorch's bf16 matrix products "
                "measured 0.6-0.8x its fp32 ones on such a CPU, so fp32 may well be faster here.")
    return None


def describe() -> str:
    """One line for a benchmark's header: the CPU, PyTorch's ISA, bf16, threads."""
    bf16 = native_bf16() or "none"
    amx = "AMX" if "amx_tile" in cpu_flags() else "no AMX"
    return (f"{cpu_name()}; PyTorch's kernels: {isa()}; native bf16: {bf16}; {amx}; "
            f"{torch.get_num_threads()} torch threads")
