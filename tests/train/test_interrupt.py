"""Ctrl-C and SIGTERM keep the work: the step in flight finishes, a checkpoint is saved at that step, one line says
where, the exit code is 128 + the signal; a second signal stops at once without leaving anything half-written; a
resume continues exactly like an uninterrupted run. Every signal is real and goes to another process, under a memory
limit: the CLI cases signal a `python -m bertviz_lab train` child, the Trainer cases run in a forked copy of this
process whose callbacks raise the signal (fit() has its handlers installed by then)."""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
import yaml
from safetensors.torch import load_file

from bertviz_lab.cli import main
from bertviz_lab.train import TrainConfig, Trainer
from bertviz_lab.train import checkpoint as ckpt
from bertviz_lab.train import trainer as trainer_module
from bertviz_lab.train.trainer import TrainingInterrupted
from bertviz_lab.util.files import WRITER_LOCK

STEPS = 150  # the CLI runs: long enough that the child cannot finish before the signal (~2 s at ~13 ms a step)
CHILD_MEMORY = 2 << 30  # bytes of address space for a CLI child (a tiny run uses under 1 GiB)
FORK_MEMORY = 1 << 30  # bytes a forked scenario may add to what this process has mapped


def _config(tmp_path: Path, **overrides) -> TrainConfig:
    values = dict(max_steps=8, batch_size=8, learning_rate=2e-3, warmup_steps=2, eval_interval=4, progress=False,
                  checkpoint_dir=str(tmp_path / "ckpt"), seed=7)
    return TrainConfig(**{**values, **overrides})


def _signals_at(step: int, *signals: int):
    """A callback that sends these signals to its own process after `step`."""
    def callback(record) -> None:
        if record.step == step:
            for number in signals:
                signal.raise_signal(number)
    return callback


def _losses(trainer: Trainer) -> list[tuple]:
    return [(r.step, r.train_mlm_loss, r.train_nsp_loss, r.lr, r.eval_mlm_loss, r.eval_nsp_accuracy)
            for r in trainer.history]


def _handlers() -> dict[int, object]:
    return {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}


def _mapped_bytes() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))


def _run_scenario(scenario: Callable[[], Any], sender: Any) -> None:
    limit = _mapped_bytes() + FORK_MEMORY
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        sender.send((True, scenario()))
    except BaseException:
        sender.send((False, traceback.format_exc()))


def _forked(scenario: Callable[[], Any], timeout: float = 120) -> Any:
    """scenario() in a forked copy of this process, so the signals it raises never reach pytest; what it returns,
    or an AssertionError with its traceback."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_run_scenario, args=(scenario, sender))
    child.start()
    sender.close()
    try:
        if not receiver.poll(timeout):
            raise AssertionError(f"the scenario did not end within {timeout} s")
        ok, value = receiver.recv()
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()
    if not ok:
        raise AssertionError(value)
    return value


def _fit_until_interrupted(trainer: Trainer) -> dict[str, Any]:
    """fit() in a forked scenario: how the TrainingInterrupted it must raise describes the end."""
    before = _handlers()
    with pytest.raises(TrainingInterrupted) as caught:
        trainer.fit()
    error = caught.value
    return {"exit_code": error.exit_code, "step": error.step, "at_once": error.at_once, "message": str(error),
            "checkpoint": error.checkpoint, "stop_reason": trainer.stop_reason, "handlers_back": _handlers() == before}


# the Trainer ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("number, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_fit_after_the_step_with_a_checkpoint_that_resumes_exactly(tmp_path, pairs, wordpiece_tokenizer,
                                                                                 make_model, number, code):
    train, test = pairs
    root = tmp_path / "b" / "ckpt"
    ended = _forked(lambda: _fit_until_interrupted(Trainer(make_model(len(wordpiece_tokenizer)), train, test,
                                                           _config(tmp_path / "b"),
                                                           callbacks=[_signals_at(3, number)])))
    assert ended == {"exit_code": code, "step": 3, "at_once": False, "checkpoint": root / "step-00000003",
                     "message": f"interrupted by {signal.Signals(number).name} at step 3; checkpoint saved to "
                                f"{root / 'step-00000003'}",
                     "stop_reason": "interrupted", "handlers_back": True}
    assert ckpt.verify_checkpoint(root) == root / "step-00000003"

    straight = Trainer(make_model(len(wordpiece_tokenizer)), train, test, _config(tmp_path / "a"))
    straight.fit()
    torch.manual_seed(12345)
    resumed = Trainer(make_model(len(wordpiece_tokenizer), seed=99), train, test, _config(tmp_path / "b"),
                      resume_from=root)
    resumed.fit()
    assert _losses(resumed) == _losses(straight)
    for (name, a), (_, b) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), name


def test_a_repeat_within_the_grace_time_is_the_same_request(tmp_path, pairs, wordpiece_tokenizer, make_model):
    """torchrun forwards the Ctrl-C its workers already got from the terminal: that must not abort the save."""
    train, _ = pairs
    ended = _forked(lambda: _fit_until_interrupted(Trainer(make_model(len(wordpiece_tokenizer)), train, None,
                                                           _config(tmp_path),
                                                           callbacks=[_signals_at(2, signal.SIGINT, signal.SIGINT)])))
    assert not ended["at_once"] and ended["checkpoint"] == tmp_path / "ckpt" / "step-00000002"
    assert ckpt.verify_checkpoint(tmp_path / "ckpt").name == "step-00000002"


def test_a_second_signal_stops_at_once_and_leaves_nothing_half_written(tmp_path, pairs, wordpiece_tokenizer,
                                                                       make_model):
    train, _ = pairs

    def scenario() -> dict[str, Any]:
        trainer_module.REPEAT_GRACE_S = 0.0  # in the forked copy only
        real_save = torch.save

        def second_signal_while_saving(obj, file, *args, **kwargs):
            if obj["step"] == 2:  # the model files are in the temporary folder already
                signal.raise_signal(signal.SIGINT)
            return real_save(obj, file, *args, **kwargs)

        ckpt.torch.save = second_signal_while_saving
        return _fit_until_interrupted(Trainer(make_model(len(wordpiece_tokenizer)), train, None,
                                              _config(tmp_path, checkpoint_interval=1),
                                              callbacks=[_signals_at(2, signal.SIGINT)]))

    ended = _forked(scenario)
    root = tmp_path / "ckpt"
    first = root / "step-00000001"
    assert ended == {"exit_code": 130, "step": 2, "at_once": True, "checkpoint": first,
                     "message": f"stopped at once by SIGINT with 2 steps done; nothing more was saved, the last "
                                f"checkpoint is {first}",
                     "stop_reason": "interrupted", "handlers_back": True}
    assert sorted(set(os.listdir(root)) - {WRITER_LOCK}) == ["latest", "step-00000001"]  # no temporary folder,
    # no step-2; the writer lock file stays (empty, unlocked)
    assert ckpt.verify_checkpoint(root) == first


def test_fit_on_a_background_thread_leaves_the_signal_handlers_alone(pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    seen = []
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(Path("unused"), checkpoint_dir=None),
                      callbacks=[lambda record: seen.append(_handlers())])
    before = _handlers()
    trainer.start(2)
    assert trainer.join(timeout=60)
    assert seen == [before, before]


# the CLI ------------------------------------------------------------------------------------------------------
def _run_config(tmp_path: Path, name: str, **training) -> Path:
    """A tiny synthetic run of STEPS steps writing into tmp_path/name; returns its YAML file."""
    folder = tmp_path / name
    folder.mkdir()
    config = {
        "data": {"corpus": "synthetic", "vocab_size": 200, "sequence_length": 16, "batch_size": 8,
                 "num_train_batches": 6, "num_test_batches": 2, "random_seed": 3},
        "model": {"dim_model": 32, "num_heads": 2, "dim_ff": 64, "num_layers": 1},  # the preset's dropout: 0.1
        "training": {"learning_rate": 3.0e-3, "device": "cpu", "steps": STEPS, **training},
        "logging": {"progress": False, "level": "WARNING", "metrics_file": str(folder / "metrics.jsonl")},
    }
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _start(config: Path, env: dict[str, str], program: str | None = None) -> subprocess.Popen:
    """`python -m bertviz_lab train --config CONFIG` (or `python -c PROGRAM train ...`) under a memory limit; the
    shell that sets the limit execs Python, so the signals sent to this process reach Python itself."""
    python = [sys.executable] + (["-c", program] if program else ["-m", "bertviz_lab"])
    limited = ["bash", "-c", f'ulimit -v {CHILD_MEMORY // 1024} && exec "$@"', "bash"]
    return subprocess.Popen(limited + python + ["train", "--config", str(config)], cwd=config.parent, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_steps(process: subprocess.Popen, metrics: Path, steps: int, timeout: float = 90) -> None:
    """Return once the child has logged `steps` steps to its metrics file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= steps:
            return
        time.sleep(0.02)
    process.kill()
    raise AssertionError(f"the child logged fewer than {steps} steps: {process.communicate()}")


def _finish(process: subprocess.Popen) -> tuple[int, list[str]]:
    try:
        _, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return process.returncode, err.splitlines()


def _metrics(path: Path) -> list[dict]:
    """The metrics file's records without their wall-clock times."""
    return [{k: v for k, v in json.loads(line).items() if k != "time"} for line in path.read_text().splitlines()]


def test_ctrl_c_saves_at_that_step_and_the_same_command_resumes_to_the_uninterrupted_result(tmp_path, child_env,
                                                                                           capsys):
    checkpoints = tmp_path / "run" / "ckpt"
    config = _run_config(tmp_path, "run", checkpoint_dir=str(checkpoints), resume_from=str(checkpoints))
    metrics = config.parent / "metrics.jsonl"
    child = _start(config, child_env)
    _wait_for_steps(child, metrics, 1)
    child.send_signal(signal.SIGINT)
    code, err = _finish(child)

    saved = ckpt.latest_checkpoint(checkpoints)
    step = int(saved.name.split("-")[1])
    assert code == 130, err
    assert err == [f"bertviz-lab train: interrupted by SIGINT at step {step}; checkpoint saved to {saved}; resume "
                   f"with the same command"]
    assert 1 <= step < STEPS and ckpt.verify_checkpoint(checkpoints) == saved
    assert [r["step"] for r in _metrics(metrics)] == list(range(1, step + 1))

    assert main(["train", "--config", str(config)]) == 0  # the same command, in this process
    reference = _run_config(tmp_path, "reference", checkpoint_dir=str(tmp_path / "reference" / "ckpt"))
    assert main(["train", "--config", str(reference)]) == 0
    capsys.readouterr()

    resumed, straight = _metrics(metrics), _metrics(reference.parent / "metrics.jsonl")
    assert [r["step"] for r in resumed] == list(range(1, STEPS + 1))  # each step once
    assert resumed == straight
    final = f"step-{STEPS:08d}/model.safetensors"
    a, b = load_file(checkpoints / final), load_file(tmp_path / "reference" / "ckpt" / final)
    assert a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)  # bit for bit


def test_sigterm_behaves_like_the_first_ctrl_c(tmp_path, child_env):
    checkpoints = tmp_path / "run" / "ckpt"
    config = _run_config(tmp_path, "run", checkpoint_dir=str(checkpoints))
    child = _start(config, child_env)
    _wait_for_steps(child, config.parent / "metrics.jsonl", 1)
    child.send_signal(signal.SIGTERM)
    code, err = _finish(child)
    saved = ckpt.latest_checkpoint(checkpoints)
    assert code == 143, err
    assert err == [f"bertviz-lab train: interrupted by SIGTERM at step {int(saved.name[5:])}; checkpoint "
                   f"saved to {saved}; resume with the same command and --set training.resume_from={checkpoints}"]
    assert ckpt.verify_checkpoint(checkpoints) == saved


SLOW_SAVES = """
import sys, time
import torch
from bertviz_lab.cli import main

real_save = torch.save

def slow_save(obj, file, *args, **kwargs):  # a slow disk from step 2 on: the second Ctrl-C arrives mid-write
    if isinstance(obj, dict) and obj.get("step", 0) >= 2:
        time.sleep(60)
    return real_save(obj, file, *args, **kwargs)

torch.save = slow_save
sys.exit(main(sys.argv[1:]))
"""


def test_a_second_ctrl_c_stops_at_once_keeping_the_last_checkpoint_whole(tmp_path, child_env):
    checkpoints = tmp_path / "run" / "ckpt"
    config = _run_config(tmp_path, "run", checkpoint_dir=str(checkpoints), checkpoint_interval=1)
    child = _start(config, child_env, program=SLOW_SAVES)
    _wait_for_steps(child, config.parent / "metrics.jsonl", 2)  # step 2 is logged, then its save starts
    child.send_signal(signal.SIGINT)
    time.sleep(1.2)  # past the grace time in which a repeat counts as the same request
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    code, err = _finish(child)
    first = checkpoints / "step-00000001"
    assert code == 130 and time.monotonic() - sent < 30, err
    assert err == [f"bertviz-lab train: stopped at once by SIGINT with 2 steps done; nothing more was saved, the "
                   f"last checkpoint is {first}; resume with the same command and --set "
                   f"training.resume_from={checkpoints}"]
    assert sorted(set(os.listdir(checkpoints)) - {WRITER_LOCK}) == ["latest", "step-00000001"]  # nothing half-written
    assert ckpt.verify_checkpoint(checkpoints) == first


def test_ctrl_c_without_checkpoint_dir_says_nothing_was_saved(tmp_path):
    config = _run_config(tmp_path, "run")

    def scenario() -> tuple[int, str, bool]:
        real_report = Trainer._report

        def ctrl_c_after_step_2(self, record):
            real_report(self, record)
            if record.step == 2:
                signal.raise_signal(signal.SIGINT)

        Trainer._report = ctrl_c_after_step_2  # in the forked copy only
        before, err = _handlers(), io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["train", "--config", str(config)])
        return code, err.getvalue(), _handlers() == before

    assert _forked(scenario) == (130, "bertviz-lab train: interrupted by SIGINT at step 2; nothing was saved (set "
                                      "training.checkpoint_dir to keep checkpoints)\n", True)
    assert sorted(p.name for p in config.parent.iterdir()) == ["metrics.jsonl", "run.yaml"]
