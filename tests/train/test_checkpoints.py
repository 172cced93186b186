"""Checkpoints: what they hold, resume equality (2k steps == k + resume + k, dropout on), atomic writes."""

from __future__ import annotations

import os

import pytest
import torch

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


def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path, pairs, tokenizer, make_model):
    train, test = pairs
    straight = Trainer(make_model(len(tokenizer)), train, test, _config(tmp_path / "a"))
    straight.fit()  # 8 steps with dropout on

    first = Trainer(make_model(len(tokenizer)), train, test, _config(tmp_path / "b"))
    first.fit(4)
    assert first.last_checkpoint.name == "step-00000004"
    # a fresh model with other weights, a fresh Trainer, the same global RNG disturbed: all must be restored
    torch.manual_seed(12345)
    resumed = Trainer(make_model(len(tokenizer), seed=99), train, test, _config(tmp_path / "b"),
                      resume_from=tmp_path / "b" / "ckpt")
    assert resumed.step == 4 and len(resumed.history) == 4
    resumed.fit()

    assert _losses(resumed) == _losses(straight)  # bit-identical, eval included
    for (name, a), (_, b) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), name


def test_checkpoint_folder_holds_safe_files_loadable_by_from_pretrained(tmp_path, pairs, tokenizer, make_model):
    train, _ = pairs
    trainer = Trainer(make_model(len(tokenizer)), train, None, _config(tmp_path, max_steps=3), tokenizer=tokenizer)
    trainer.fit()
    path = tmp_path / "ckpt" / "step-00000003"
    assert trainer.last_checkpoint == path and ckpt.latest_checkpoint(tmp_path / "ckpt") == path
    assert {"config.json", "model.safetensors", "trainer_state.pt", "vocab.txt"} <= {p.name for p in path.iterdir()}
    state = torch.load(path / "trainer_state.pt", weights_only=True)  # no pickled objects
    assert state["step"] == 3 and len(state["history"]) == 3 and state["history"][-1]["step"] == 3
    assert {"optimizer", "scheduler", "rng", "data"} <= set(state)
    assert {"torch", "python"} <= set(state["rng"][0]) and "collator" in state["data"]
    reloaded = BERTForPreTraining.from_pretrained(path)
    for (name, a), (_, b) in zip(trainer.model.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(a, b), name
    assert BERTTokenizerFast.from_pretrained(path).vocab == tokenizer.vocab


def test_only_the_newest_checkpoints_are_kept(tmp_path, pairs, tokenizer, make_model):
    train, _ = pairs
    trainer = Trainer(make_model(len(tokenizer)), train, None,
                      _config(tmp_path, max_steps=6, checkpoint_interval=1, keep_checkpoints=2))
    trainer.fit()
    assert [p.name for p in ckpt.list_checkpoints(tmp_path / "ckpt")] == ["step-00000005", "step-00000006"]


def test_a_failure_while_saving_leaves_the_previous_checkpoint_intact(tmp_path, pairs, tokenizer, make_model,
                                                                      monkeypatch):
    train, _ = pairs
    trainer = Trainer(make_model(len(tokenizer)), train, None, _config(tmp_path, max_steps=6))
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
    resumed = Trainer(make_model(len(tokenizer)), train, None, _config(tmp_path, max_steps=6), resume_from=root)
    assert resumed.step == 2


def test_a_crash_mid_save_is_ignored_and_cleaned_up(tmp_path, pairs, tokenizer, make_model):
    train, _ = pairs
    trainer = Trainer(make_model(len(tokenizer)), train, None, _config(tmp_path, max_steps=6))
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
    ckpt.write_text_atomically(target, "new\n")
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["latest"]


def test_resume_errors_name_the_path(tmp_path, pairs, tokenizer, make_model):
    train, _ = pairs
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Trainer(make_model(len(tokenizer)), train, None, _config(tmp_path), resume_from=tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):
        Trainer(make_model(len(tokenizer)), train, None, _config(tmp_path), resume_from=tmp_path / "empty")
    broken = tmp_path / "broken" / "step-00000001"
    broken.mkdir(parents=True)
    (broken / "trainer_state.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="could not be loaded"):
        Trainer(make_model(len(tokenizer)), train, None, _config(tmp_path), resume_from=broken)
