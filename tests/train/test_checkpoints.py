"""Checkpoints: what they hold, resume equality (2k steps == k + resume + k, dropout on), atomic writes, manifests
that stop a resume from a damaged or changed file."""

from __future__ import annotations

import hashlib
import json
import logging
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

from bertviz_lab.model import BERTForPreTraining, BERTTokenizerFast
from bertviz_lab.train import TrainConfig, Trainer
from bertviz_lab.train import checkpoint as ckpt


def _config(tmp_path, **overrides) -> TrainConfig:
    values = dict(max_steps=8, batch_size=8, learning_rate=2e-3, warmup_steps=2, eval_interval=4, progress=False,
                  checkpoint_dir=str(tmp_path / "ckpt"), seed=7)
    return TrainConfig(**{**values, **overrides})


def _losses(trainer: Trainer) -> list[tuple]:
    return [(r.step, r.train_mlm_loss, r.train_nsp_loss, r.lr, r.eval_mlm_loss, r.eval_nsp_accuracy)
            for r in trainer.history]


def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path, pairs, wordpiece_tokenizer, make_model):
    train, test = pairs
    straight = Trainer(make_model(len(wordpiece_tokenizer)), train, test, _config(tmp_path / "a"))
    straight.fit()  # 8 steps with dropout on

    first = Trainer(make_model(len(wordpiece_tokenizer)), train, test, _config(tmp_path / "b"))
    first.fit(4)
    assert first.last_checkpoint.name == "step-00000004"
    # a fresh model with other weights, a fresh Trainer, the same global RNG disturbed: all must be restored
    torch.manual_seed(12345)
    resumed = Trainer(make_model(len(wordpiece_tokenizer), seed=99), train, test, _config(tmp_path / "b"),
                      resume_from=tmp_path / "b" / "ckpt")
    assert resumed.step == 4 and len(resumed.history) == 4
    resumed.fit()

    assert _losses(resumed) == _losses(straight)  # bit-identical, eval included
    for (name, a), (_, b) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), name


def test_checkpoint_folder_holds_safe_files_loadable_by_from_pretrained(tmp_path, pairs, wordpiece_tokenizer,
                                                                        make_model):
    train, _ = pairs
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path, max_steps=3),
                      tokenizer=wordpiece_tokenizer)
    trainer.fit()
    path = tmp_path / "ckpt" / "step-00000003"
    assert trainer.last_checkpoint == path and ckpt.latest_checkpoint(tmp_path / "ckpt") == path
    assert {"config.json", "model.safetensors", "trainer_state.pt", "vocab.txt", "manifest.json"} <= {
        p.name for p in path.iterdir()}
    manifest = json.loads((path / "manifest.json").read_text())["files"]
    assert set(manifest) == {p.name for p in path.iterdir()} - {"manifest.json"}
    assert manifest["model.safetensors"] == {"size": (path / "model.safetensors").stat().st_size,
                                             "sha256": hashlib.sha256((path / "model.safetensors").read_bytes())
                                             .hexdigest()}
    state = torch.load(path / "trainer_state.pt", weights_only=True)  # no pickled objects
    assert state["step"] == 3 and len(state["history"]) == 3 and state["history"][-1]["step"] == 3
    assert {"optimizer", "scheduler", "rng", "data"} <= set(state)
    assert {"torch", "python"} <= set(state["rng"][0]) and "collator" in state["data"]
    reloaded = BERTForPreTraining.from_pretrained(path)
    for (name, a), (_, b) in zip(trainer.model.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(a, b), name
    assert BERTTokenizerFast.from_pretrained(path).vocab == wordpiece_tokenizer.vocab


def test_only_the_newest_checkpoints_are_kept(tmp_path, pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None,
                      _config(tmp_path, max_steps=6, checkpoint_interval=1, keep_checkpoints=2))
    trainer.fit()
    assert [p.name for p in ckpt.list_checkpoints(tmp_path / "ckpt")] == ["step-00000005", "step-00000006"]


def test_a_failure_while_saving_leaves_the_previous_checkpoint_intact(tmp_path, pairs, wordpiece_tokenizer, make_model,
                                                                      monkeypatch):
    train, _ = pairs
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path, max_steps=6))
    good = trainer.fit(2) and trainer.last_checkpoint
    good_bytes = {p.name: p.read_bytes() for p in good.iterdir()}
    real_save = torch.save

    def dies_half_way(obj, file, *args, **kwargs):
        with open(file, "wb") as handle:
            handle.write(b"half a file")
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(ckpt.torch, "save", dies_half_way)
    with pytest.raises(OSError, match="disk full"):
        trainer.fit(1)  # step 3 trains, then its checkpoint dies half-way through writing the trainer state
    monkeypatch.setattr(ckpt.torch, "save", real_save)

    root = tmp_path / "ckpt"
    assert not (root / "step-00000003").exists()  # nothing under the final name
    assert not [p for p in os.listdir(root) if p.startswith(ckpt.TEMP_PREFIX)]  # the temporary folder is gone
    assert ckpt.latest_checkpoint(root) == good
    assert {p.name: p.read_bytes() for p in good.iterdir()} == good_bytes
    assert ckpt.load_trainer_state(root)["step"] == 2
    resumed = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path, max_steps=6),
                      resume_from=root)
    assert resumed.step == 2


def test_a_crash_mid_save_is_ignored_and_cleaned_up(tmp_path, pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path, max_steps=6))
    good = trainer.fit(1) and trainer.last_checkpoint
    root = tmp_path / "ckpt"
    leftover = root / f"{ckpt.TEMP_PREFIX}step-00000002-abc"  # what a killed process leaves behind
    leftover.mkdir()
    (leftover / "trainer_state.pt").write_bytes(b"\x00" * 10)
    assert ckpt.latest_checkpoint(root) == good and ckpt.list_checkpoints(root) == [good]
    trainer.fit(1)
    assert not leftover.exists() and ckpt.latest_checkpoint(root).name == "step-00000002"


def test_pointer_file_is_replaced_atomically(tmp_path):
    target = tmp_path / "latest"
    target.write_text("old\n")
    ckpt.write_atomically(target, "new\n", sync=True)
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["latest"]


def test_resume_errors_name_the_path(tmp_path, pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path), resume_from=tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):
        Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path), resume_from=tmp_path / "empty")
    broken = tmp_path / "broken" / "step-00000001"
    broken.mkdir(parents=True)
    (broken / "trainer_state.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="could not be loaded"):
        Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path), resume_from=broken)


# damaged checkpoints ----------------------------------------------------------------------------------------
def _flip_bytes_near_the_end(file):
    data = bytearray(file.read_bytes())
    data[-40:-20] = bytes(b ^ 0x5A for b in data[-40:-20])  # inside the tensor data: the header still parses
    file.write_bytes(bytes(data))


def _scale_weights(file):
    tensors = load_file(file)
    save_file({name: tensor * -3 for name, tensor in tensors.items()}, file, metadata={"format": "pt"})


def _truncate(file):
    file.write_bytes(file.read_bytes()[:file.stat().st_size // 2])


DAMAGES = {
    "bad header": ("model.safetensors", lambda f: f.write_bytes(b"\xff" * 8 + f.read_bytes()[8:])),
    "truncated": ("model.safetensors", _truncate),
    "empty": ("model.safetensors", lambda f: f.write_bytes(b"")),
    "missing": ("model.safetensors", lambda f: f.unlink()),
    "random bytes in the tensor data": ("model.safetensors", _flip_bytes_near_the_end),
    "weights times -3": ("model.safetensors", _scale_weights),
    "trainer state flipped": ("trainer_state.pt", _flip_bytes_near_the_end),
    "trainer state truncated": ("trainer_state.pt", _truncate),
    "trainer state missing": ("trainer_state.pt", lambda f: f.unlink()),
    "tokenizer changed": ("vocab.txt", lambda f: f.write_text(f.read_text().replace("[UNK]", "[UNK2]"))),
    "manifest damaged": ("manifest.json", lambda f: f.write_text("{not json")),
}


def _saved(tmp_path, train, wordpiece_tokenizer, make_model):
    """A 2-step run's checkpoint directory and its only checkpoint folder."""
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path, max_steps=4),
                      tokenizer=wordpiece_tokenizer)
    trainer.fit(2)
    return tmp_path / "ckpt", trainer.last_checkpoint


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_checkpoint_stops_the_resume_naming_the_file(tmp_path, pairs, wordpiece_tokenizer, make_model,
                                                               damage):
    train, _ = pairs
    root, folder = _saved(tmp_path, train, wordpiece_tokenizer, make_model)
    name, spoil = DAMAGES[damage]
    spoil(folder / name)
    for resume_from in (root, folder):
        model = make_model(len(wordpiece_tokenizer), seed=5)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        with pytest.raises(ckpt.CheckpointError) as error:
            Trainer(model, train, None, _config(tmp_path, max_steps=4), resume_from=resume_from)
        message = str(error.value)
        assert isinstance(error.value, ValueError) and "\n" not in message and len(message) < 600
        assert message.startswith(str(folder / name)), message
        assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # nothing was loaded


def test_a_checkpoint_without_a_manifest_loads_with_a_warning(tmp_path, pairs, wordpiece_tokenizer, make_model, caplog):
    train, _ = pairs
    root, folder = _saved(tmp_path, train, wordpiece_tokenizer, make_model)
    (folder / "manifest.json").unlink()  # as an older version wrote it
    with caplog.at_level(logging.WARNING, logger="bertviz_lab.train"):
        resumed = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path, max_steps=4),
                          resume_from=root)
    assert resumed.step == 2
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"checkpoint {folder} has no manifest.json (written by an older version): its files cannot be verified."]


@pytest.mark.parametrize("damage", ["bad header", "truncated", "empty", "trainer state truncated"])
def test_an_unreadable_file_without_a_manifest_is_still_one_line_naming_it(tmp_path, pairs, wordpiece_tokenizer,
                                                                           make_model,
                                                                          damage):
    train, _ = pairs
    root, folder = _saved(tmp_path, train, wordpiece_tokenizer, make_model)
    (folder / "manifest.json").unlink()
    name, spoil = DAMAGES[damage]
    spoil(folder / name)
    with pytest.raises(ckpt.CheckpointError) as error:
        Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path, max_steps=4), resume_from=root)
    assert str(error.value).startswith(str(folder / name)) and "\n" not in str(error.value)


def test_the_manifest_is_written_before_the_folder_gets_its_name(tmp_path, pairs, wordpiece_tokenizer, make_model,
                                                                 monkeypatch):
    train, _ = pairs
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(tmp_path, max_steps=4))
    renamed = []
    real_replace = os.replace

    def watching_replace(source, target):
        if os.path.isdir(source):
            renamed.append(sorted(os.listdir(source)))
        return real_replace(source, target)

    monkeypatch.setattr(ckpt.os, "replace", watching_replace)
    trainer.fit(1)
    assert renamed and "manifest.json" in renamed[0]
    assert ckpt.verify_checkpoint(tmp_path / "ckpt") == trainer.last_checkpoint


def test_a_second_training_into_a_checkpoint_dir_in_use_stops_before_its_first_step(tmp_path, pairs,
                                                                                    wordpiece_tokenizer, make_model):
    """While another run holds checkpoint_dir (here another thread, as another process would), fit() refuses with
    one line naming it and leaves the other's checkpoints alone; once it is free, the same trainer trains."""
    import threading

    from bertviz_lab.util.files import FolderInUse, one_writer

    train, test = pairs
    first = Trainer(make_model(len(wordpiece_tokenizer)), train, test, _config(tmp_path, keep_checkpoints=1))
    first.fit(2)
    kept = sorted(p.name for p in (tmp_path / "ckpt").iterdir() if p.name.startswith("step-"))
    held, release = threading.Event(), threading.Event()

    def other_run() -> None:
        with one_writer(tmp_path / "ckpt", "training"):
            held.set()
            release.wait(60)

    holder = threading.Thread(target=other_run)
    holder.start()
    held.wait(60)
    second = Trainer(make_model(len(wordpiece_tokenizer)), train, test, _config(tmp_path, keep_checkpoints=1))
    try:
        with pytest.raises(FolderInUse) as raised:
            second.fit(4)
        with pytest.raises(FolderInUse):
            second.save_checkpoint()
    finally:
        release.set()
        holder.join()
    message = str(raised.value)
    assert f"ckpt is being written by another training run (pid {os.getpid()} on" in message and "\n" not in message
    assert second.step == 0 and second.history == []
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir() if p.name.startswith("step-")) == kept
    second.fit(4)
    assert second.last_checkpoint.name == "step-00000004"
