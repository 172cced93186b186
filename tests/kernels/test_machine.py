"""kernels.machine: the CPU a number was measured on (its name, PyTorch's ISA, native bf16, AMX) and one line where
bf16 cannot run natively."""

from __future__ import annotations

import torch

from bertviz_lab.kernels import machine


def test_describe_names_the_cpu_pytorchs_isa_bf16_and_threads():
    line = machine.describe()
    assert line.startswith(machine.cpu_name())
    assert f"PyTorch's kernels: {torch.backends.cpu.get_cpu_capability()}" in line
    assert f"native bf16: {machine.native_bf16() or 'none'}" in line
    assert f"{torch.get_num_threads()} torch threads" in line
    assert ("; AMX;" in line) == ("amx_tile" in machine.cpu_flags())


def test_native_bf16_reads_the_cpus_flags_fastest_first(monkeypatch):
    machine.native_bf16.cache_clear()
    try:
        for flags, expected in ((["avx2", "avx512_bf16", "amx_bf16"], "amx_bf16"), (["avx512_bf16"], "avx512_bf16"),
                                (["neon", "bf16"], "arm bf16"), (["avx2", "fma"], None)):
            monkeypatch.setattr(machine, "cpu_flags", lambda flags=flags: frozenset(flags))
            monkeypatch.setattr(machine.platform, "system", lambda: "Linux")
            machine.native_bf16.cache_clear()
            assert machine.native_bf16() == expected, flags
    finally:
        machine.native_bf16.cache_clear()


def test_bf16_is_refused_in_one_line_where_it_is_not_native(monkeypatch):
    monkeypatch.setattr(machine, "native_bf16", lambda: None)
    refusal = machine.bf16_refusal("cpu")
    assert refusal.startswith("bf16 needs a CPU that computes it natively") and "\n" not in refusal
    assert machine.bf16_refusal("meta") == ("bf16 runs on a CPU or a CUDA GPU here, not on meta: use fp32 "
                                            "(precision='fp32', or --precision fp32).")
    monkeypatch.setattr(machine, "native_bf16", lambda: "amx_bf16")
    assert machine.bf16_refusal("cpu") is None and machine.bf16_caution("cpu") is None
