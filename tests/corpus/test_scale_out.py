"""A process killed with SIGKILL mid-run resumes to the same tables as an uninterrupted run; two gloo processes
under torchrun give the same tables and nearest() answers as one process; the CLI's errors are one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from test_folder import assert_same_tables

from bertviz_lab.corpus import Corpus, analyze

CLI = [sys.executable, "-m", "bertviz_lab", "corpus", "--model", "default", "--data", "builtin", "--no-progress"]


@pytest.mark.slow
def test_a_run_killed_mid_way_resumes_to_the_tables_of_an_uninterrupted_run(tmp_path, minilm, child_env):
    out = tmp_path / "killed"
    child = subprocess.Popen([*CLI, "--out", str(out), "--shard-size", "20", "--batch-size", "10", "--vectors",
                              "hidden", "--layers", "0,3"], env=child_env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not (out / "shards" / "00000").is_dir():  # the first shard on disk: the run is under way
            assert child.poll() is None, child.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "no shard was written in 300 s"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL
    with pytest.raises(ValueError, match="is not a complete corpus"):
        Corpus.open(out)
    done = sorted(p.name for p in (out / "shards").iterdir() if not p.name.startswith("."))
    assert 1 <= len(done) < 21  # killed mid-way: 420 texts in 21 shards
    model, tokenizer = minilm
    from bertviz_lab.corpus import SENTENCES

    settings = dict(layers=[0, 3], vectors=["hidden"], batch_size=10, shard_size=20, progress=False,
                    model_name="default")
    resumed = analyze(model, tokenizer, SENTENCES, out, **settings)
    whole = analyze(model, tokenizer, SENTENCES, tmp_path / "whole", **settings)
    assert_same_tables(resumed, whole)
    assert resumed.nearest(7, 2, 3, k=10).equals(whole.nearest(7, 2, 3, k=10))


@pytest.mark.slow
def test_two_torchrun_processes_give_the_tables_of_one_process(tmp_path, child_env):
    options = ["--shard-size", "50", "--batch-size", "16", "--vectors", "hidden,qk", "--layers", "1,4", "--heads",
               "0,5"]
    one = subprocess.run([*CLI, "--out", str(tmp_path / "one"), *options], env=child_env, capture_output=True,
                         text=True, timeout=600)
    assert one.returncode == 0, one.stderr[-3000:]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          *CLI[1:], "--out", str(tmp_path / "two"), *options], env=child_env, capture_output=True,
                         text=True, timeout=600)
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    assert two.stdout.count("420 texts") == 1  # rank 0 alone reports
    a, b = Corpus.open(tmp_path / "one"), Corpus.open(tmp_path / "two")
    assert_same_tables(a, b)
    assert a.manifest == b.manifest and a.qk_heads == [(1, 0), (1, 5), (4, 0), (4, 5)]
    for text_id, position, layer in [(0, 1, 1), (211, 3, 4), (419, 0, 4)]:
        assert a.nearest(text_id, position, layer, k=10).equals(b.nearest(text_id, position, layer, k=10))
    assert a.qk_map(4, 5, n=300).equals(b.qk_map(4, 5, n=300))


@pytest.mark.slow
def test_the_cli_reports_bad_input_in_one_line(tmp_path, child_env):
    (tmp_path / "c.csv").write_text("sentence\nhello\n", encoding="utf-8")
    done = subprocess.run([*CLI[:-3], "--data", str(tmp_path / "c.csv"), "--out", str(tmp_path / "o"), "--layers",
                           "0"], env=child_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"bertviz-lab corpus: error: {tmp_path / 'c.csv'} has no column 'text'; its columns are: sentence."]
