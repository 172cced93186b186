"""TensorBoard: a tiny run with log_to="tensorboard" writes event files that TensorBoard's own reader loads, with
the live curves' scalars (equal to the history's values) and one attention image per evaluation, the last equal to
the trained model's attention on the probe sentence; `--log tensorboard` on the command line; one line without the
package."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest
import torch
from tiny_models import tiny_config

from bertviz_lab.model import BERTForPreTraining
from bertviz_lab.train import TrainConfig, Trainer, generate_synthetic_bert_batches, synthetic_to_training_batch
from bertviz_lab.train.tensorboard_log import ATTENTION_TAG, SCALARS, TensorBoardLog, attention_image

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def events(folder) -> EventAccumulator:
    accumulator = EventAccumulator(str(folder), size_guidance={"images": 0, "scalars": 0})
    accumulator.Reload()
    return accumulator


def tiny_run(log_dir, steps: int = 9, eval_interval: int = 3) -> Trainer:
    torch.manual_seed(0)
    model = BERTForPreTraining(tiny_config(vocab_size=200, num_hidden_layers=2, max_position_embeddings=64))
    batches = [synthetic_to_training_batch(b) for b in generate_synthetic_bert_batches(4, 8, 16, 200, random_seed=0)]
    config = TrainConfig(max_steps=steps, batch_size=8, eval_interval=eval_interval, progress=False, device="cpu",
                         log_interval=0, log_to="tensorboard", log_dir=str(log_dir))
    trainer = Trainer(model, batches, batches[:1], config)
    trainer.fit()
    return trainer


def test_a_run_writes_its_scalars_and_an_attention_image_per_evaluation(tmp_path):
    from PIL import Image

    trainer = tiny_run(tmp_path / "tb")
    board = events(tmp_path / "tb")
    history = {name: [(r.step, getattr(r, name)) for r in trainer.history if getattr(r, name) is not None]
               for name in SCALARS}
    assert set(board.Tags()["scalars"]) == {name for name, values in history.items() if values}
    for name in board.Tags()["scalars"]:
        logged = [(e.step, e.value) for e in board.Scalars(name)]
        assert [step for step, _ in logged] == [step for step, _ in history[name]]
        np.testing.assert_allclose([v for _, v in logged], [v for _, v in history[name]], rtol=1e-6)  # float32
    images = board.Images(ATTENTION_TAG)
    assert [image.step for image in images] == [3, 6, 9]
    log = next(c for c in trainer.callbacks if isinstance(c, TensorBoardLog))
    last = np.asarray(Image.open(io.BytesIO(images[-1].encoded_image_string)).convert("RGB"))
    assert np.array_equal(last, attention_image(log.last_layer_attention()))  # the model as it ended
    probe = log._probe[0]
    assert last.shape[:2] == (probe.shape[1] * 8, probe.shape[1] * 8)
    assert trainer.model.training  # drawing the image left the model as it found it


def test_attention_image_colours_each_cell_by_its_share_of_the_largest_weight():
    image = attention_image(np.array([[0.5, 0.25], [0.0, 0.5]]))
    assert image.shape == (16, 16, 3) and image.dtype == np.uint8
    assert image[0, 0].tolist() == [8, 48, 107] and image[8, 0].tolist() == [247, 251, 255]
    assert image[0, 8].tolist() == np.rint((np.array([247, 251, 255]) + np.array([8, 48, 107])) / 2).tolist()


def test_the_command_line_flag_and_a_missing_package(tmp_path, monkeypatch, capsys):
    from bertviz_lab.cli import main

    out = tmp_path / "tb"
    assert main(["train", "--config", "tiny", "--log", "tensorboard", "--set", "training.steps=4", "--set",
                 "training.eval_interval=2", "--set", "logging.progress=false", "--set", f"logging.log_dir={out}",
                 "--set", "data.vocab_size=300"]) == 0
    board = events(out)
    assert "train_mlm_loss" in board.Tags()["scalars"] and len(board.Images(ATTENTION_TAG)) == 2
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(ImportError, match=r"pip install 'bertviz_lab\[tensorboard\]'"):
        tiny_run(tmp_path / "none")
    capsys.readouterr()
    assert main(["train", "--config", "tiny", "--log", "tensorboard", "--set", "training.steps=2"]) == 2
    line, = capsys.readouterr().err.strip().splitlines()
    assert "logging.log_to: log_to='tensorboard' needs the tensorboard package" in line


def test_the_attention_image_can_be_asked_for_before_the_first_evaluation(tmp_path):
    torch.manual_seed(0)
    model = BERTForPreTraining(tiny_config(vocab_size=200, num_hidden_layers=2, max_position_embeddings=64))
    ids = torch.tensor([[2, 17, 18, 19, 3]])
    probe = (ids, torch.zeros_like(ids), torch.ones_like(ids))
    log = TensorBoardLog(str(tmp_path / "tb"), model, lambda: probe)
    image = log.last_layer_attention()  # no record yet: the probe is drawn now, not read as None
    assert image.shape == (5, 5)
    np.testing.assert_allclose(image.sum(axis=1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="no probe sentence"):
        TensorBoardLog(str(tmp_path / "tb2"), model, lambda: None).last_layer_attention()
