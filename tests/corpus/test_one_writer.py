"""One run writes a corpus folder at a time: a second run into it stops at once with one line naming the first, a lock
left by a killed run blocks nothing, and the finished folder is a single run's. Ctrl-C and SIGTERM stop the CLI with
one line saying what was kept, a bad --out is refused before the model loads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from test_folder import assert_same_tables
from test_scale_out import CLI

from bertviz_lab.corpus import SENTENCES, Corpus, analyze, folder
from bertviz_lab.util.files import WRITER_NOTE

OPTIONS = ["--shard-size", "20", "--batch-size", "10", "--layers", "0,3", "--vectors", "hidden"]
SETTINGS = dict(layers=[0, 3], vectors=["hidden"], batch_size=10, shard_size=20, progress=False,
                model_name="default")


def command(out: Path, data: Path | None = None) -> list[str]:
    """The CLI on the built-in corpus, or on the text file `data`."""
    where = CLI if data is None else [*CLI[:7], str(data), *CLI[8:]]
    return [*where, "--out", str(out), *OPTIONS]


def start(out: Path, env: dict[str, str], data: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(command(out, data), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(condition, child: subprocess.Popen, what: str) -> None:
    """Until `condition()` holds, while the child runs (an exit first is a failure showing its stderr)."""
    deadline = time.monotonic() + 300
    while not condition():
        assert child.poll() is None, f"the run ended before {what}: {child.stderr.read()[-2000:]}"
        assert time.monotonic() < deadline, f"no {what} in 300 s"
        time.sleep(0.01)


@pytest.mark.slow
def test_a_second_run_into_a_folder_being_written_stops_at_once_and_the_first_finishes(tmp_path, minilm,
                                                                                       child_env):
    out = tmp_path / "shared"
    data = tmp_path / "texts.txt"  # three times the built-in corpus: the first run is still going when refused
    data.write_text(SENTENCES.read_text(encoding="utf-8") * 3, encoding="utf-8")
    first = start(out, child_env, data)
    try:
        wait_for(lambda: (out / WRITER_NOTE).is_file(), first, "writer lock")
        second = subprocess.run([*command(out, data)], env=child_env, capture_output=True, text=True, timeout=300)
        assert first.poll() is None, "the first run ended before the second was refused: the test proves nothing"
        assert second.returncode == 2
        assert second.stderr.strip().splitlines() == [
            f"bertviz-lab corpus: error: {out} is being written by another analyze run (pid {first.pid} on "
            f"{os.uname().nodename}); wait for it to end, or choose another folder."]
        assert first.wait(timeout=600) == 0, first.stderr.read()[-2000:]
    finally:
        first.kill()
        first.wait()
    model, tokenizer = minilm
    single = analyze(model, tokenizer, data, tmp_path / "single", **SETTINGS)
    assert_same_tables(Corpus.open(out), single)
    assert Corpus.open(out).manifest == single.manifest


def test_a_lock_left_by_a_killed_run_blocks_nothing(tmp_path, minilm, child_env):
    out = tmp_path / "stale"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from bertviz_lab.corpus import folder
        with folder.writing(Path({str(out)!r})):
            print("holding", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    """)], env=child_env, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "holding\n"
    assert holder.wait(timeout=60) == -signal.SIGKILL
    assert f'"pid": {holder.pid}' in (out / WRITER_NOTE).read_text(encoding="utf-8")  # its note is still there
    model, tokenizer = minilm
    corpus = analyze(model, tokenizer, SENTENCES.read_text(encoding="utf-8").splitlines()[:8], out, layers=[1],
                     progress=False)
    assert corpus.num_texts == 8
    assert not (out / WRITER_NOTE).exists()  # overwritten by this run's note, which it removed when it let go


def test_a_folder_being_written_refuses_a_run_on_another_thread_of_the_same_process(tmp_path, minilm):
    model, tokenizer = minilm
    texts = ["One text.", "Another text."]
    refused: list[BaseException] = []

    def other_run() -> None:
        try:
            analyze(model, tokenizer, texts, tmp_path / "busy", layers=[0], progress=False)
        except ValueError as error:
            refused.append(error)

    with folder.writing(tmp_path / "busy"):
        thread = threading.Thread(target=other_run)
        thread.start()
        thread.join()
        inside = analyze(model, tokenizer, texts, tmp_path / "busy", layers=[0], progress=False)  # the holder's own
    assert len(refused) == 1
    assert f"is being written by another analyze run (pid {os.getpid()} on" in str(refused[0])
    assert len(inside.head_stats()) == 12


def test_a_folder_of_other_files_gets_no_lock_file(tmp_path, minilm):
    model, tokenizer = minilm
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ValueError, match="holds other files and no corpus"):
        analyze(model, tokenizer, ["One text."], tmp_path / "mine", layers=[0], progress=False)
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


@pytest.mark.slow
@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_the_cli_with_one_line_and_the_same_command_resumes(tmp_path, child_env,
                                                                                     signal_number):
    out = tmp_path / "stopped"
    child = start(out, child_env)
    try:
        wait_for(lambda: (out / "shards" / "00000").is_dir(), child, "shard")
        child.send_signal(signal_number)
        assert child.wait(timeout=300) == 128 + signal_number
    finally:
        child.kill()
        child.wait()
    lines = child.stderr.read().strip().splitlines()
    assert len(lines) == 1, lines
    done = len([p for p in (out / "shards").iterdir() if not p.name.startswith(".")])
    assert lines[0] == (f"bertviz-lab corpus: interrupted after {done} of 21 shards; rerun the same command to "
                        "resume.")
    resumed = subprocess.run(command(out), env=child_env, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert Corpus.open(out).num_texts == 420


@pytest.mark.slow
def test_an_out_that_cannot_be_a_folder_is_one_line_before_the_model_loads(tmp_path, child_env):
    (tmp_path / "a_file").write_text("x", encoding="utf-8")
    for out, why in ((tmp_path / "a_file", "is not a directory"), (tmp_path / "a_file" / "below", "")):
        done = subprocess.run([*CLI[:5], "no-such-model-anywhere", *CLI[6:], "--out", str(out)], env=child_env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 2
        line, = done.stderr.strip().splitlines()
        assert line.startswith(f"bertviz-lab corpus: error: --out {out} ") and why in line, line
        assert "no-such-model-anywhere" not in line  # the model was never looked for


def test_a_write_that_fails_mid_run_is_one_line_and_the_rerun_resumes(tmp_path, monkeypatch, capsys):
    """A full disk while a shard is written: one line naming the file and saying what was kept (exit 2); the same
    command afterwards finishes the corpus."""
    import pyarrow.parquet as pq

    from bertviz_lab.cli import main

    real_write = pq.write_table
    written: list = []

    def full_after_two_shards(table, where, *args, **kwargs):
        if len(written) >= 6:  # three tables a shard: the third shard's first table meets a full disk
            raise OSError(28, "No space left on device", str(where))
        written.append(where)
        return real_write(table, where, *args, **kwargs)

    monkeypatch.setattr(pq, "write_table", full_after_two_shards)
    out = tmp_path / "full"
    argv = ["corpus", "--model", "default", "--data", "builtin", "--no-progress", "--out", str(out), *OPTIONS]
    assert main(argv) == 2
    line, = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"bertviz-lab corpus: error: {out / 'shards'}/.00002.tmp/")
    assert line.endswith(": no space left on device after 2 of 21 shards; rerun the same command to resume.")
    monkeypatch.setattr(pq, "write_table", real_write)
    assert main(argv) == 0
    assert Corpus.open(out).num_texts == 420


def test_a_missing_corpus_package_is_one_line_naming_the_extra_and_nothing_is_written(tmp_path, monkeypatch,
                                                                                      capsys):
    import sys

    from bertviz_lab.cli import main
    from bertviz_lab.corpus import Corpus, analyze

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what find_spec reports for a package that is not installed
    out = tmp_path / "out"
    assert main(["corpus", "--model", "default", "--data", "builtin", "--no-progress", "--out", str(out)]) == 2
    line, = capsys.readouterr().err.strip().splitlines()
    assert line == ("bertviz-lab corpus: error: the corpus needs pyarrow, which is not installed: pip install "
                    "'bertviz_lab[corpus]' (the 'lab' extra includes it).")
    assert not out.exists()
    with pytest.raises(ImportError, match=r"pip install 'bertviz_lab\[corpus\]'"):
        analyze(None, None, ["a text"], out)
    with pytest.raises(ImportError, match="the corpus needs pyarrow"):
        Corpus.open(tmp_path)
    assert not out.exists()
