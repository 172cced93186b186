"""kernels.status(): what runs attention, linear layers, LayerNorm and GELU here, and why not the others, under the
same environment variables that steer the forward passes (each case in a fresh process, as a user would set them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from tiny_models import tiny_config

from bertviz_lab import kernels
from bertviz_lab.kernels import build, choice

REPORT = """
import json
from bertviz_lab import kernels
print(json.dumps({row.operation: [row.backend, row.why, row.others] for row in kernels.status().choices
                  if row.device == "cpu"}))
"""


def cpu_status(**env: str) -> dict[str, list]:
    """{operation: [backend, why, {other: why not}]} for the CPU, in a process started with `env`."""
    clean = {k: v for k, v in os.environ.items() if k not in ("BERTVIZ_LAB_CPU_GEMM", "BERTVIZ_LAB_FUSED_KERNELS")}
    done = subprocess.run([sys.executable, "-c", REPORT], env={**clean, **env}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow  # a fresh interpreter
@pytest.mark.usefixtures("avx2_kernels")
def test_the_avx2_kernels_asked_for_run_attention_linear_layers_layer_norm_and_gelu():
    rows = cpu_status(BERTVIZ_LAB_CPU_GEMM="avx2")
    assert {op: row[0] for op, row in rows.items()} == {"attention": "avx2", "linear": "avx2",
                                                         "layer_norm": "avx2", "gelu": "avx2", "encoder": "eager"}
    assert rows["linear"][2] == {"onednn": "the AVX2 GEMM is faster and comes first"}
    assert set(rows["attention"][2]) == {"sdpa", "eager"}
    assert rows["layer_norm"][2] == {"triton": "a GPU kernel"}


@pytest.mark.slow  # a fresh interpreter
def test_by_default_the_avx2_kernels_run_only_where_pytorchs_own_are_avx2_at_best():
    """The default on this CPU, read from the machine: avx2.c where PyTorch's kernels use AVX2 and it builds;
    PyTorch's own (oneDNN's packed GEMM on x86) where they use AVX-512 or wider, with the reason naming that."""
    rows = cpu_status()
    capability = torch.backends.cpu.get_cpu_capability()
    wider = capability not in ("AVX2", "DEFAULT", "NO AVX")
    if not wider and build.library() is not None:
        assert {op: row[0] for op, row in rows.items()} == {"attention": "avx2", "linear": "avx2",
                                                             "layer_norm": "avx2", "gelu": "avx2", "encoder": "eager"}
        return
    linear = "mkl" if wider and choice.MKL_PACKING else "onednn" if choice.ONEDNN_PACKING else "pytorch"
    assert {op: row[0] for op, row in rows.items()} == {"attention": "sdpa", "linear": linear,
                                                         "layer_norm": "pytorch", "gelu": "pytorch", "encoder": "eager"}
    if wider:
        because = f"PyTorch's own kernels use {capability} here, faster than avx2.c (BERTVIZ_LAB_CPU_GEMM=avx2 asks"
        assert all(row[2]["avx2"].startswith(because) for op, row in rows.items() if op != "encoder")


@pytest.mark.slow  # a fresh interpreter
def test_onednn_chosen_by_the_environment_takes_the_linear_layers_and_sdpa_the_attention():
    rows = cpu_status(BERTVIZ_LAB_CPU_GEMM="onednn")
    expected_linear = "onednn" if choice.ONEDNN_PACKING else "pytorch"
    assert (rows["attention"][0], rows["linear"][0], rows["gelu"][0], rows["layer_norm"][0]) == (
        "sdpa", expected_linear, "pytorch", "pytorch")
    assert rows["attention"][2]["avx2"] == "BERTVIZ_LAB_CPU_GEMM=onednn rules it out"
    assert rows["gelu"][2] == {"avx2": "BERTVIZ_LAB_CPU_GEMM=onednn rules it out"}


@pytest.mark.slow  # a fresh interpreter
def test_cpu_gemm_off_leaves_addmm_and_says_why_neither_packed_gemm_runs():
    rows = cpu_status(BERTVIZ_LAB_CPU_GEMM="off")
    assert rows["linear"][:2] == ["pytorch", "addmm (MKL)"]
    assert rows["linear"][2]["avx2"] == "BERTVIZ_LAB_CPU_GEMM=off rules it out"
    assert "onednn" in rows["linear"][2]


@pytest.mark.slow  # a fresh interpreter
def test_fused_kernels_off_turns_every_fast_path_off():
    rows = cpu_status(BERTVIZ_LAB_FUSED_KERNELS="0")
    assert {op: row[0] for op, row in rows.items()} == {"attention": "sdpa", "linear": "pytorch",
                                                         "layer_norm": "pytorch", "gelu": "pytorch",
                                                         "encoder": "eager"}
    assert all("BERTVIZ_LAB_FUSED_KERNELS=0" in row[2]["fast paths"] for row in rows.values())


@pytest.mark.slow  # a fresh interpreter
def test_an_unknown_cpu_gemm_is_an_error_naming_the_choices():
    done = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "BERTVIZ_LAB_CPU_GEMM": "blas"})
    assert done.returncode != 0
    assert "BERTVIZ_LAB_CPU_GEMM='blas': use auto, avx2, onednn, mkl or off" in done.stderr


@pytest.mark.usefixtures("avx2_kernels")
def test_status_says_what_a_forward_pass_then_runs():
    """The report and the model follow one rule: what status names for attention, linear layers, GELU and
    LayerNorm is what the model's layers were given."""
    from bertviz_lab.model import BERT

    for gemm in ("avx2", "onednn", "mkl"):
        if (gemm == "onednn" and not choice.ONEDNN_PACKING) or (gemm == "mkl" and not choice.MKL_PACKING):
            continue
        with kernels.override(cpu_gemm=gemm):  # the rules of the models built in the block, and of the report
            model = BERT(tiny_config()).eval()
            report = kernels.status()
            given = {layer.attention.self.attention_backend.name for layer in model.encoder.layer}
            assert given == {report["attention"].backend} == {"avx2" if gemm == "avx2" else "sdpa"}
            assert {layer.output.linear_backend.name for layer in model.encoder.layer} == {report["linear"].backend}
            gelu = {getattr(layer.intermediate.gelu_backend, "name", "pytorch") for layer in model.encoder.layer}
            assert gelu == {report["gelu"].backend}
            norms = {getattr(layer.output.add_layer_norm_backend, "name", "pytorch") for layer in model.encoder.layer}
            assert norms == {report["layer_norm"].backend} == {"avx2" if gemm == "avx2" else "pytorch"}
            with torch.inference_mode():
                model(torch.randint(5, 100, (1, 32)))


def test_rows_are_looked_up_by_operation_and_device_and_print_as_a_table():
    report = kernels.status()
    assert report["attention"] is report["attention", "cpu"]
    with pytest.raises(KeyError, match="no status for 'softmax' on 'cpu'"):
        report["softmax"]
    text = str(report)
    assert all(f"cpu   {op}" in text for op in ("attention", "linear", "layer_norm", "gelu", "encoder"))
    if not torch.cuda.is_available():
        assert "cuda" not in {row.device for row in report.choices}


def test_the_encoder_row_says_the_compiled_graph_is_asked_for_per_model(monkeypatch):
    row = kernels.status()["encoder"]
    assert (row.backend, row.why) == ("eager", "the layers one by one, each on the backends above")
    assert "model.set_backend(compiled=True)" in row.others["compiled"]
    monkeypatch.setenv("CXX", "/nowhere/c++")
    assert kernels.status()["encoder"].others["compiled"] == (
        "torch.compile's CPU code needs a C++ compiler and there is none (/nowhere/c++ not found; set CXX)")
