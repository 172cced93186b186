"""A run configuration this machine cannot hold is refused when it is read: threads, positions, and the memory of the
model, AdamW and one batch, each a one-line ConfigError naming the key as written; the CLI exits 2 with that line,
in a child under a 2 GB address-space limit, at once."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bertviz_lab.model import footprint
from bertviz_lab.train.run_config import MAX_THREADS, ConfigError, load_config

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
ADDRESS_SPACE = 2 * 1024**3
REFUSED = (r"^{key}={value} needs about [\d.e+]+ [KMGTPE]?B to train on the CPU \(float32 weights x4 with AdamW, and "
           r"the activations of \d+ sequences of \d+ tokens\); {source}; set BERTVIZ_LAB_MEMORY_LIMIT to override "
           r"\(a size such as 64GB, or off\)\.$")
ON_CPU = {"training": {"device": "cpu"}}


@pytest.fixture(autouse=True)
def limit_64gb(monkeypatch):
    """Every machine refuses and accepts the same configs: the limit is 64 GB unless a test says otherwise."""
    monkeypatch.setenv(footprint.MEMORY_LIMIT_VARIABLE, "64GB")


@pytest.mark.parametrize(("override", "key", "value"), [
    ("model.dim_model=1000000", "model.dim_model", 1000000),
    ("model.hidden_size=1000000", "model.hidden_size", 1000000),  # named as written, not by its other spelling
    ("model.num_layers=1000000", "model.num_layers", 1000000),
    ("model.dim_ff=10000000000", "model.dim_ff", 10**10),
    ("data.vocab_size=1000000000000", "data.vocab_size", 10**12),
    ("data.batch_size=1000000000", "data.batch_size", 10**9),
    ("data.sequence_length=1000000000", "data.sequence_length", 10**9),
    ("data.max_seq_length=1000000", "data.max_seq_length", 10**6),
    ("model.max_position_embeddings=10000000000", "model.max_position_embeddings", 10**10),
])
def test_an_absurd_size_is_one_config_error_naming_the_key(override, key, value):
    with pytest.raises(ConfigError) as refused:
        load_config(None, [override, "training.device=cpu"])  # the defaults, one key changed
    source = r"BERTVIZ_LAB_MEMORY_LIMIT=64GB allows 64 GB"
    assert re.match(REFUSED.format(key=re.escape(key), value=value, source=source), str(refused.value)), \
        str(refused.value)


def test_synthetic_data_made_before_training_counts(tmp_path):
    config = {"data": {"corpus": "synthetic", "num_train_batches": 10**9}, **ON_CPU}
    with pytest.raises(ConfigError, match=r"^data\.num_train_batches=1000000000 needs about"):
        load_config(config)
    load_config({"data": {"corpus": "synthetic", "num_train_batches": 1000}, **ON_CPU})


def test_the_machine_limit_is_named_when_no_override_is_set(monkeypatch):
    monkeypatch.delenv(footprint.MEMORY_LIMIT_VARIABLE)
    with pytest.raises(ConfigError, match=r"; this machine has [\d.]+ [KMGT]?B available; set BERTVIZ_LAB"):
        load_config(TINY, ["model.num_layers=1000000"])


def test_off_turns_the_memory_check_off_and_a_bad_override_is_named(monkeypatch):
    monkeypatch.setenv(footprint.MEMORY_LIMIT_VARIABLE, "off")
    assert load_config(TINY, ["model.num_layers=1000000"])["model"]["num_layers"] == 1000000
    monkeypatch.setenv(footprint.MEMORY_LIMIT_VARIABLE, "plenty")
    with pytest.raises(ConfigError, match=r"^BERTVIZ_LAB_MEMORY_LIMIT='plenty' is not a size"):
        load_config(TINY)


@pytest.mark.parametrize("overrides", [
    [], ["model.preset=base"], ["model.preset=large"], ["model.preset=large", "data.sequence_length=512"],
    ["data.vocab_size=30522", "data.batch_size=256"], [f"training.num_threads={MAX_THREADS}"],
])
def test_real_runs_are_accepted(overrides):
    load_config(TINY, overrides + ["training.device=cpu"])


@pytest.mark.parametrize("config", ["tiny.yaml", "bert_base_gpu.yaml", "multi_gpu.yaml"])
def test_the_shipped_configs_are_accepted(config):
    load_config(REPO / "configs" / config)


def test_on_an_accelerator_only_what_the_host_holds_is_checked():
    """A GPU holds AdamW's state and the activations: a batch too big for this host's RAM is not refused for it;
    a model too big to build on the host is (a device not here is the runner's error to name)."""
    load_config(TINY, ["training.device=cuda:7", "data.batch_size=200000"])
    with pytest.raises(ConfigError, match=r"^model\.num_layers=1000000 needs about 793 GB of host memory to build"):
        load_config(TINY, ["training.device=cuda:7", "model.num_layers=1000000"])


def test_threads_are_capped_at_four_per_cpu():
    with pytest.raises(ConfigError) as refused:
        load_config(TINY, ["training.num_threads=100000"])
    assert str(refused.value) == (f"training.num_threads must be at most {MAX_THREADS} (4 x the {os.cpu_count()} "
                                  f"CPUs here), got 100000.")
    with pytest.raises(ConfigError, match=r"training.num_threads must be >= 1, got 0"):
        load_config(TINY, ["training.num_threads=0"])


def test_a_sequence_longer_than_the_positions_is_refused_when_read():
    with pytest.raises(ConfigError, match=r"^model\.max_position_embeddings \(64\) is smaller than "
                                          r"data\.sequence_length \(128\)\.$"):
        load_config(TINY, ["model.max_position_embeddings=64", "data.sequence_length=128"])


@pytest.mark.parametrize("override", ["data.vocab_size=1e12", "data.batch_size=1e9", "data.vocab_size=.inf"])
def test_sizes_are_integers(override):
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)} must be an integer, got"):
        load_config(TINY, [override])


# the CLI, in children under RLIMIT_AS ----------------------------------------------------------------------------
CLI_CASES = ["model.dim_model=1000000", "data.vocab_size=1e12", "data.vocab_size=1000000000000",
             "data.batch_size=1000000000", "data.sequence_length=1000000000", "model.num_layers=1000000",
             "training.num_threads=100000"]
CHILD = textwrap.dedent("""
    import contextlib, io, json, sys, time
    from bertviz_lab.cli import main
    results = {}
    for override in sys.argv[2:]:
        stderr, started = io.StringIO(), time.perf_counter()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            code = main(["train", "--config", sys.argv[1], "--set", override, "--set", "training.device=cpu"])
        results[override] = [code, stderr.getvalue(), time.perf_counter() - started]
    print(json.dumps(results))
""")


def limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def child_env() -> dict[str, str]:
    """The machine's own memory limit decides in the children (2 GB of address space)."""
    env = {key: value for key, value in os.environ.items() if key != footprint.MEMORY_LIMIT_VARIABLE}
    return {**env, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}


@pytest.fixture(scope="module")
def cli_results() -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(TINY), *CLI_CASES], env=child_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=120, preexec_fn=limit_address_space)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("override", CLI_CASES)
def test_the_cli_exits_2_with_one_line_at_once(cli_results, override):
    code, stderr, seconds = cli_results[override]
    key, value = override.split("=")
    assert code == 2 and stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"bertviz-lab train: error: {key}"), stderr
    assert value in stderr and seconds < 20


def test_the_console_script_exits_2_with_one_line(tmp_path):
    command = [sys.executable, "-m", "bertviz_lab", "train", "--config", str(TINY), "--output",
               str(tmp_path / "r.json"), "--set", "model.num_layers=1000000", "--set", "training.device=cpu"]
    done = subprocess.run(command, env=child_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          preexec_fn=limit_address_space)
    assert done.returncode == 2 and done.stdout == ""
    assert re.match(r"^bertviz-lab train: error: model\.num_layers=1000000 needs about 26 TB to train on the CPU "
                    r".*; this machine has [\d.]+ [MG]B available; set BERTVIZ_LAB_MEMORY_LIMIT to override "
                    r"\(a size such as 64GB, or off\)\.\n$", done.stderr), done.stderr
    assert sorted(tmp_path.iterdir()) == []
