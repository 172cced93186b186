"""Trainer: metrics records and callbacks, schedule, accumulation, background start()/stop(), NaN stop, errors."""

from __future__ import annotations

import json
import logging
import math
import sys
import threading
import time

import pytest
import torch

from bertviz_lab.model import BERTForMaskedLM
from bertviz_lab.train import (
    MetricsRecord,
    NonFiniteLossError,
    TrainConfig,
    Trainer,
    create_mlm_batch,
    create_nsp_pair_batch,
    generate_synthetic_bert_batches,
    synthetic_to_training_batch,
)
from bertviz_lab.train import checkpoint as ckpt
from bertviz_lab.train.trainer import warmup_then_linear_decay

RECORD_KEYS = {"step", "train_loss", "train_mlm_loss", "train_nsp_loss", "train_mlm_accuracy", "train_nsp_accuracy",
               "lr", "grad_norm", "time"}
EVAL_KEYS = {"eval_mlm_loss", "eval_nsp_loss", "eval_mlm_accuracy", "eval_nsp_accuracy"}


def _config(**overrides) -> TrainConfig:
    values = dict(max_steps=6, batch_size=8, learning_rate=2e-3, progress=False, seed=3)
    return TrainConfig(**{**values, **overrides})


def test_callbacks_get_one_record_per_step_with_eval_on_eval_steps(pairs, wordpiece_tokenizer, make_model):
    train, test = pairs
    seen: list[MetricsRecord] = []
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, test, _config(eval_interval=3),
                      callbacks=[seen.append])
    returned = trainer.fit()
    assert [r.step for r in seen] == [1, 2, 3, 4, 5, 6] and returned == seen == trainer.history
    for record in seen:
        expected = RECORD_KEYS | (EVAL_KEYS if record.step % 3 == 0 else set())
        assert set(record) == expected and set(dict(record)) == expected  # a mapping of its set fields
        assert all(math.isfinite(v) for v in dict(record).values())
        assert record.train_loss == pytest.approx(record.train_mlm_loss + record.train_nsp_loss)
        assert 0 <= record.train_nsp_accuracy <= 1 and record["lr"] == record.lr
    assert [r.time for r in seen] == sorted(r.time for r in seen)
    assert MetricsRecord.from_dict(seen[2].to_dict()) == seen[2]
    assert trainer.stop_reason == "finished"


def test_loss_falls_with_warmup_then_linear_decay(pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    config = _config(max_steps=10, warmup_steps=4, learning_rate=1e-2)
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, config)
    history = trainer.fit()
    lrs = [r.lr for r in history]
    assert lrs[:4] == pytest.approx([2.5e-3, 5e-3, 7.5e-3, 1e-2]) and lrs[4:] == pytest.approx(
        [1e-2 * (10 - s) / 6 for s in range(4, 10)])
    first, last = (sum(r.train_mlm_loss for r in part) / 3 for part in (history[:3], history[-3:]))
    assert last < first - 0.2  # over three steps each: one step's loss moves with its batch's masks
    factor = warmup_then_linear_decay(0, 5)
    assert [factor(s) for s in range(6)] == pytest.approx([1, 0.8, 0.6, 0.4, 0.2, 0])


def test_gradient_accumulation_gives_the_same_steps_as_one_big_batch(make_model):
    """Losses are normalised by the predictions of the whole step, so 2 x 4 rows == 8 rows (dropout off), also when
    one micro-batch holds no masked position."""
    normalised = Trainer(make_model(500, dropout=0.0), synthetic_batches(8, 1), None, _config(max_steps=2))
    accumulated = Trainer(make_model(500, dropout=0.0), synthetic_batches(4, 2), None,
                          _config(max_steps=2, gradient_accumulation_steps=2))
    for x, y in zip(normalised.fit(), accumulated.fit(), strict=True):
        assert x.train_mlm_loss is not None and y.train_mlm_loss is not None
        assert x.train_mlm_loss == pytest.approx(y.train_mlm_loss, rel=1e-5)
        assert x.train_nsp_loss == pytest.approx(y.train_nsp_loss, rel=1e-5)
        assert x.grad_norm == pytest.approx(y.grad_norm, rel=1e-4)


def synthetic_batches(rows: int, parts: int) -> list[dict[str, torch.Tensor]]:
    """Two fixed 8-row global batches cut into `parts` micro-batches of `rows` rows each: the first is 4 masked rows
    then 4 unmasked NSP pairs (so its second half predicts no token), the second 8 masked NSP pairs."""
    first = _concat(synthetic_to_training_batch(create_mlm_batch(4, 16, 500, random_seed=1)),
                    synthetic_to_training_batch(create_nsp_pair_batch(4, 16, 500, random_seed=2)))
    second = synthetic_to_training_batch(create_nsp_pair_batch(8, 16, 500, random_seed=3, mask_prob=0.3))
    assert (first["mlm_labels"][:4] != -100).any() and (first["mlm_labels"][4:] == -100).all()
    assert (second["mlm_labels"] != -100).any()
    return [{k: v[i * rows:(i + 1) * rows] for k, v in batch.items()} for batch in (first, second)
            for i in range(parts)]


def _concat(*batches: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {key: torch.cat([batch[key] for batch in batches]) for key in batches[0]}


def test_a_step_without_masked_tokens_has_no_mlm_values(tmp_path, make_model):
    """Nothing to predict: MLM loss and accuracy are None (null in the metrics file), the loss is the NSP term."""
    batches = [synthetic_to_training_batch(create_nsp_pair_batch(8, 16, 200, random_seed=seed)) for seed in (4, 5)]
    metrics = tmp_path / "metrics.jsonl"
    trainer = Trainer(make_model(200), batches, batches, _config(max_steps=2, nsp_weight=0.5,
                                                                 metrics_file=str(metrics)))
    for record in trainer.fit():
        assert record.train_mlm_loss is None and record.train_mlm_accuracy is None
        assert "train_mlm_loss" not in record and "train_mlm_accuracy" not in dict(record)
        assert record.train_loss == pytest.approx(0.5 * record.train_nsp_loss)
        assert math.isfinite(record.grad_norm) and record.grad_norm > 0
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [(line["train_mlm_loss"], line["train_mlm_accuracy"]) for line in lines] == [(None, None)] * 2
    evaluation = trainer.evaluate()
    assert evaluation["eval_mlm_loss"] is None and evaluation["eval_mlm_accuracy"] is None
    assert math.isfinite(evaluation["eval_nsp_loss"])


def test_background_start_and_clean_stop_writes_a_checkpoint(tmp_path, pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None,
                      _config(max_steps=100_000, checkpoint_dir=str(tmp_path / "ckpt")))
    steps_seen = threading.Event()
    trainer.callbacks.append(lambda record: record.step >= 3 and steps_seen.set())
    thread = trainer.start()
    assert thread.daemon and trainer.is_running
    with pytest.raises(RuntimeError, match="already running"):
        trainer.start()
    with pytest.raises(RuntimeError, match="cannot fit.. while training runs in the background"):
        trainer.fit(1)
    assert steps_seen.wait(timeout=60), "the background run made no progress"
    trainer.stop()  # waits: the current step finishes, then a checkpoint is written
    assert not trainer.is_running and trainer.stop_reason == "stopped"
    assert trainer.step == len(trainer.history) >= 3
    saved = ckpt.latest_checkpoint(tmp_path / "ckpt")
    assert saved is not None and saved == trainer.last_checkpoint
    assert ckpt.load_trainer_state(saved)["step"] == trainer.step
    # the trainer can go on in the foreground afterwards
    before = trainer.step
    trainer.fit(2)
    assert trainer.step == before + 2


def test_background_errors_are_raised_by_join(pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config())

    def broken(record):
        raise RuntimeError("panel exploded")

    trainer.callbacks.append(broken)
    trainer.start()
    deadline = time.monotonic() + 60
    while trainer.is_running and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(RuntimeError, match="panel exploded"):
        trainer.join()
    assert trainer.join() is True  # the error is reported once


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    root = tmp_path / "ckpt"
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None,
                      _config(max_steps=20, checkpoint_dir=str(root), checkpoint_interval=2, keep_checkpoints=5))

    def poison(record):
        if record.step == 5:  # after step 5 (no checkpoint at 5), the weights go bad: step 6's loss is NaN
            with torch.no_grad():
                trainer.model.cls.seq_relationship.weight.fill_(float("nan"))

    trainer.callbacks.append(poison)
    with pytest.raises(NonFiniteLossError, match=r"step 6 .*step-00000004") as caught:
        trainer.fit()
    assert "nan" in str(caught.value)
    assert trainer.stop_reason == "non-finite loss" and trainer.step == 5 and len(trainer.history) == 5
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["step-00000002", "step-00000004"]
    assert ckpt.latest_checkpoint(root).name == "step-00000004"
    state = ckpt.load_trainer_state(root)
    assert state["step"] == 4 and all(math.isfinite(r["train_mlm_loss"]) for r in state["history"])
    fresh = make_model(len(wordpiece_tokenizer))
    ckpt.load_model_weights(fresh, root)
    assert all(torch.isfinite(p).all() for p in fresh.parameters())


def test_log_lines_are_written_above_the_progress_bar_and_the_handler_is_put_back(pairs, wordpiece_tokenizer,
                                                                                  make_model,
                                                                                   capsys):
    train, _ = pairs
    handler = logging.StreamHandler(sys.stderr)  # pytest's captured stderr, where the bar goes too
    handler.setFormatter(logging.Formatter("LOG %(message)s"))
    log = logging.getLogger("bertviz_lab.train")
    level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(max_steps=4, log_interval=1,
                                                                                     progress=True))
        trainer.fit(2)
        assert handler.stream is sys.stderr
        trainer.callbacks.append(lambda record: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            trainer.fit(1)
        assert handler.stream is sys.stderr  # put back when a step fails too
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    err = capsys.readouterr().err
    logged = [line for line in err.split("\n") if "LOG step" in line]
    assert "pretraining" in err and len(logged) == 3
    assert all(line.split("\r")[-1].startswith("LOG step") for line in logged), logged  # not after the bar's text


class EndWatcher:
    """A callback with an on_train_end hook: records each step and how each fit() ended."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.ends: list[tuple[str | None, int]] = []

    def __call__(self, record: MetricsRecord) -> None:
        self.steps.append(record.step)

    def on_train_end(self, trainer: Trainer) -> None:
        self.ends.append((trainer.stop_reason, trainer.step))


def test_callbacks_hear_when_each_fit_ends(pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    watcher = EndWatcher()
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(max_steps=4), callbacks=[watcher,
                                                                                                          print])
    trainer.fit(2)
    trainer.fit()
    assert watcher.steps == [1, 2, 3, 4] and watcher.ends == [("finished", 2), ("finished", 4)]


def test_nan_without_checkpoint_dir_says_nothing_was_saved(pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    model = make_model(len(wordpiece_tokenizer))
    with torch.no_grad():
        model.bert.embeddings.LayerNorm.weight.fill_(float("inf"))
    watcher = EndWatcher()
    with pytest.raises(NonFiniteLossError, match="step 1 .*no checkpoint was written"):
        Trainer(model, train, None, _config(), callbacks=[watcher]).fit()
    assert watcher.steps == [] and watcher.ends == [("non-finite loss", 0)]  # told of the failed run too


def test_trains_on_synthetic_batches(make_model):
    batches = [synthetic_to_training_batch(b) for b in generate_synthetic_bert_batches(4, 8, 16, 200, random_seed=0)]
    trainer = Trainer(make_model(200), batches, batches[:2], _config(max_steps=8, learning_rate=5e-3))
    history = trainer.fit()  # the 4 batches twice over
    mlm_batches = [i for i in range(4) if history[i].train_mlm_loss is not None]
    nsp_only = [i for i in range(4) if history[i].train_mlm_loss is None]  # the seed's NSP batches mask nothing
    assert mlm_batches and nsp_only and all(history[i].train_mlm_accuracy is None for i in nsp_only)
    assert all(history[i + 4].train_mlm_loss < history[i].train_mlm_loss for i in mlm_batches)
    assert set(trainer.evaluate()) == EVAL_KEYS


def test_bf16_on_a_cpu_trains_under_autocast_where_native_and_is_refused_in_one_line_elsewhere(
        monkeypatch, pairs, wordpiece_tokenizer, make_model):
    from bertviz_lab.kernels import machine

    train, _ = pairs
    monkeypatch.setattr(machine, "native_bf16", lambda: None)
    with pytest.raises(ValueError, match=r"precision='bf16': bf16 needs a CPU that computes it natively") as error:
        Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(precision="bf16", device="cpu"))
    assert "\n" not in str(error.value)
    monkeypatch.setattr(machine, "native_bf16", lambda: "amx_bf16")  # the products are bf16 on any CPU's kernels
    model = make_model(len(wordpiece_tokenizer))
    seen = []
    model.bert.encoder.layer[0].intermediate.dense.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    history = Trainer(model, train, None, _config(precision="bf16", device="cpu", max_steps=2)).fit()
    assert seen and set(seen) == {torch.bfloat16}  # under autocast
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the weights stay fp32
    assert all(math.isfinite(record.train_loss) for record in history)


def test_errors_name_the_bad_value(pairs, wordpiece_tokenizer, make_model, tiny_config):
    train, _ = pairs
    model = make_model(len(wordpiece_tokenizer))
    with pytest.raises(TypeError, match="BERTForPreTraining"):
        Trainer(BERTForMaskedLM(tiny_config(vocab_size=50)), train)
    with pytest.raises(ValueError, match="fp16 mixed precision runs on CUDA only"):
        Trainer(model, train, None, _config(precision="fp16", device="cpu"))
    with pytest.raises(ValueError, match="TrainConfig.learning_rate"):
        TrainConfig(learning_rate=0)
    with pytest.raises(ValueError, match="TrainConfig.precision"):
        TrainConfig(precision="fp8")
    with pytest.raises(TypeError, match="TrainConfig.max_steps"):
        TrainConfig(max_steps=2.5)
    with pytest.raises(ValueError, match="divisible by gradient_accumulation_steps"):
        TrainConfig(batch_size=10, gradient_accumulation_steps=4)
    trainer = Trainer(model, train, None, _config())
    with pytest.raises(ValueError, match="max_steps=6"):
        trainer.fit(7)
    with pytest.raises(ValueError, match="no eval_data"):
        trainer.evaluate()
    with pytest.raises(ValueError, match="checkpoint_dir is not set"):
        trainer.save_checkpoint()
    with pytest.raises(ValueError, match=r"train_data\[0\] has 4 rows"):
        Trainer(model, [synthetic_to_training_batch(b) for b in generate_synthetic_bert_batches(1, 4, 8, 100)], None,
                _config())
    with pytest.raises(TypeError, match="callable"):
        Trainer(model, train, None, _config(), callbacks=["not callable"])


def test_unwritable_checkpoint_dir_or_metrics_file_fail_before_the_first_step(tmp_path, pairs, wordpiece_tokenizer,
                                                                              make_model):
    train, _ = pairs
    file = tmp_path / "file"
    file.write_text("")
    with pytest.raises(ValueError, match=rf"^TrainConfig.checkpoint_dir={file}/ckpt cannot be created: {file} is not "
                                         r"a directory$"):
        Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(checkpoint_dir=str(file / "ckpt")))
    with pytest.raises(ValueError, match=r"^TrainConfig.metrics_file=/dev/full cannot be written: No space left on "
                                         r"device$"):
        Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(metrics_file="/dev/full"))
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
