"""analyze(..., precision="bf16"): the model under bf16 autocast where the CPU (or GPU) computes bf16 natively, the
attention statistics kept in float32, so every share stays within 2e-3 and the entropy within 1e-2 nats of the fp32
run on the packaged MiniLM; the folder records its precision; elsewhere bf16 is one line, before anything loads."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from bertviz_lab.cli import main
from bertviz_lab.corpus import Corpus, analyze
from bertviz_lab.corpus.statistics import STATISTICS
from bertviz_lab.kernels import machine

SHARES = [name for name in STATISTICS if name != "entropy"]


def test_bf16_statistics_are_within_2e3_of_fp32_and_the_folder_says_bf16(minilm, small_texts, tmp_path):
    model, tokenizer = minilm
    if machine.native_bf16() is None:  # this CPU: refused in one line (the test below checks the line)
        with pytest.raises(ValueError, match="bf16 needs a CPU that computes it natively"):
            analyze(model, tokenizer, small_texts, tmp_path / "bf16", precision="bf16", progress=False)
        assert not (tmp_path / "bf16").exists()
        return
    fp32 = analyze(model, tokenizer, small_texts, tmp_path / "fp32", batch_size=8, progress=False)
    with warnings.catch_warnings():  # an AVX-512 BF16 CPU without AMX says fp32 may be faster: true, not tested here
        warnings.simplefilter("ignore")
        bf16 = analyze(model, tokenizer, small_texts, tmp_path / "bf16", batch_size=8, progress=False,
                       precision="bf16")
    assert (fp32.precision, bf16.precision) == ("fp32", "bf16")
    assert json.loads((tmp_path / "bf16" / "manifest.json").read_text())["precision"] == "bf16"
    want, got = fp32.head_stats(), bf16.head_stats()
    assert (want[["layer", "head", "queries"]] == got[["layer", "head", "queries"]]).all().all()
    shares = np.abs(want[SHARES].to_numpy() - got[SHARES].to_numpy()).max()
    entropy = np.abs(want["entropy"].to_numpy() - got["entropy"].to_numpy()).max()
    assert shares <= 2e-3 and entropy <= 1e-2, (shares, entropy)
    assert shares > 0  # the model did run in bf16
    with pytest.raises(ValueError, match=r"other settings \(precision differ"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analyze(model, tokenizer, small_texts, tmp_path / "fp32", batch_size=8, progress=False, precision="bf16")


def test_without_native_bf16_the_option_is_one_line_before_anything_loads(minilm, tmp_path, monkeypatch, capsys):
    model, tokenizer = minilm
    monkeypatch.setattr(machine, "native_bf16", lambda: None)
    with pytest.raises(ValueError) as error:
        analyze(model, tokenizer, ["A text."], tmp_path / "a", precision="bf16", progress=False)
    assert str(error.value).startswith("bf16 needs a CPU that computes it natively (AVX-512 BF16 or AMX on x86, BF16 "
                                       "on Arm); this ")
    assert str(error.value).endswith("use fp32 (precision='fp32', or --precision fp32).")
    assert "\n" not in str(error.value) and not (tmp_path / "a").exists()
    loaded = []
    monkeypatch.setattr("bertviz_lab.model.auto.load_default", lambda **kwargs: loaded.append(1))
    assert main(["corpus", "--model", "default", "--data", "builtin", "--no-progress", "--precision", "bf16",
                 "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bertviz-lab corpus: error: bf16 needs a CPU") and len(err.splitlines()) == 1 and loaded == []
    with pytest.raises(ValueError, match=r"precision must be one of \('fp32', 'bf16'\), got 'fp16'"):
        analyze(model, tokenizer, ["A text."], tmp_path / "c", precision="fp16", progress=False)


def test_an_fp32_folder_records_fp32_and_a_folder_from_before_reads_as_fp32(minilm, tmp_path):
    model, tokenizer = minilm
    corpus = analyze(model, tokenizer, ["A text.", "Another one."], tmp_path / "c", progress=False)
    manifest = tmp_path / "c" / "manifest.json"
    data = json.loads(manifest.read_text())
    assert data["precision"] == "fp32" and corpus.precision == "fp32"
    del data["precision"]  # written before runs could be bf16
    manifest.write_text(json.dumps(data))
    assert Corpus.open(tmp_path / "c").precision == "fp32"
    data["precision"] = "fp8"
    manifest.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="field 'precision' is 'fp8', not 'fp32' or 'bf16'"):
        Corpus.open(tmp_path / "c")


def test_avx512_bf16_without_amx_is_allowed_with_a_line_saying_fp32_may_be_faster(monkeypatch):
    from bertviz_lab.corpus.analyze import check_precision

    monkeypatch.setattr(machine, "native_bf16", lambda: "avx512_bf16")
    with pytest.warns(UserWarning, match="computes bf16 with AVX-512 BF16 but has no AMX: .* fp32 may well be faster"):
        check_precision("bf16", torch.device("cpu"))
    monkeypatch.setattr(machine, "native_bf16", lambda: "amx_bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_precision("bf16", torch.device("cpu"))
        check_precision("fp32", torch.device("cpu"))
