"""BertRunner (YAML -> data, tokenizer, model, Trainer -> results dict) and the `bertviz-lab train` CLI."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

import torch

from bertviz_lab.device import select_device
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.heads import BERTForPreTraining
from bertviz_lab.model.tokenizer import BERTTokenizerFast
from bertviz_lab.train import checkpoint as ckpt
from bertviz_lab.train.data import SentencePairDataset, load_documents, split_documents
from bertviz_lab.train.presets import preset_names
from bertviz_lab.train.run_config import PRESETS, ConfigError, RunConfig, clip, load_config
from bertviz_lab.train.schema import DEFAULT_EPOCHS, MODEL_FIELDS
from bertviz_lab.train.synthetic import generate_synthetic_bert_batches, synthetic_to_training_batch
from bertviz_lab.train.trainer import (
    NonFiniteLossError,
    TrainConfig,
    Trainer,
    TrainingInterrupted,
    run_config_keys,
)
from bertviz_lab.util.distributed import DistributedContext, broadcast_object, init_distributed
from bertviz_lab.util.files import FolderInUse
from bertviz_lab.util.interrupts import interrupt_handlers
from bertviz_lab.util.paths import file_problem, folder_problem

logger = logging.getLogger("bertviz_lab.train")

SYNTHETIC_CORPUS = "synthetic"
RESULT_KEYS = ("train_mlm_loss", "train_nsp_loss", "test_mlm_loss", "test_nsp_loss", "test_nsp_accuracy",
               "test_mlm_accuracy")
SETTING_KEYS = run_config_keys()  # TrainConfig field -> the run config key that sets it
# how errors name a TrainConfig field: its key; max_steps is worked out from training.steps (or the epochs)
FIELD_KEYS = {**SETTING_KEYS, "max_steps": "training.steps"}


def _mean(records: list, key: str) -> float | None:
    """Mean of a metric over records that have it (None when none has)."""
    values = [r[key] for r in records if key in r]
    return sum(values) / len(values) if values else None


def _count_pairs(data: Any) -> int:
    """Sequences in a pair dataset (epoch 0) or a list of ready batches."""
    if not data:
        return 0
    return sum(b["input_ids"].shape[0] for b in data) if isinstance(data, list) else len(data)


def _run_config_names(message: str) -> str:
    """A TrainConfig error in the run config's words: `TrainConfig.max_steps` -> `training.steps`."""
    return re.sub(r"TrainConfig\.(\w+)", lambda m: FIELD_KEYS.get(m.group(1), f"training.{m.group(1)}"), message)


def check_writable(name: str, path: str | None, *, folder: bool) -> None:
    """ConfigError `name=path <why>` when the run could not write `path` (a folder or a file); None: nothing to do.

    An empty path is refused: it would mean the current folder."""
    if path is None:
        return
    if not path.strip():
        raise ConfigError(f"{name} is an empty path {path!r}, which would write into the current folder; give a "
                          f"path, or null.")
    problem = folder_problem(path) if folder else file_problem(path)
    if problem is not None:
        raise ConfigError(f"{name}={clip(str(path))} {problem}")


def _same_folder(a: str, b: str) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def final_window(steps: int) -> int:
    """How many final steps the train_* results average: 10% of the run, at least 1, at most 100."""
    return max(1, min(100, steps // 10))


def _saved_tokenizer(path: str | Path, key: str) -> BERTTokenizerFast:
    """A tokenizer from a folder the config names; a missing or damaged one is a ConfigError naming the key."""
    try:
        return BERTTokenizerFast.from_pretrained(path)
    except (FileNotFoundError, ValueError) as error:
        raise ConfigError(f"{key}: {error}") from error


class BertRunner:
    """Runs one pretraining job described by a YAML file (or mapping); `run()` returns the results dict, and
    `build_trainer()` gives the same Trainer unstarted (for a live panel).

    Results: train_mlm_loss / train_nsp_loss (mean over the final 10% of steps, at most 100), test_mlm_loss,
    test_nsp_loss, test_mlm_accuracy, test_nsp_accuracy (held-out pairs, or null without test data),
    initial_train_mlm_loss / initial_train_nsp_loss (step 1), steps, seconds, steps_per_second,
    sequences_per_second, num_parameters, vocab_size, train_pairs, test_pairs, device, precision, world_size,
    checkpoint, stop_reason.
    """

    def __init__(self, config_path: str | os.PathLike | Mapping[str, Any] | None = None,
                 overrides: Iterable[str] | Mapping[str, Any] = ()) -> None:
        self.config: RunConfig = load_config(config_path, overrides)
        self.trainer: Trainer | None = None
        self.tokenizer: BERTTokenizerFast | None = None
        self.train_data: Any = None
        self.test_data: Any = None
        self.dist = DistributedContext()

    # building blocks -------------------------------------------------------------------------------------
    @property
    def seed(self) -> int:
        seed = self.config["training"]["seed"]
        return self.config["data"]["random_seed"] if seed is None else seed

    def value(self, key: str) -> Any:
        """The value of `section.key`."""
        section, _, name = key.partition(".")
        return self.config[section][name]

    def train_config(self, max_steps: int) -> TrainConfig:
        """The Trainer's settings from the run config's keys (training.seed: data.random_seed when null)."""
        values = {name: self.value(key) for name, key in SETTING_KEYS.items()}
        values.update(max_steps=max_steps, warmup_steps=min(values["warmup_steps"], max_steps), seed=self.seed)
        try:
            return TrainConfig(**values)
        except (TypeError, ValueError) as error:
            raise ConfigError(_run_config_names(str(error))) from error

    def model_config(self, vocab_size: int) -> BERTConfig:
        """BERTConfig from model.* (preset, then the keys given), sized for the vocabulary and sequence length."""
        section = self.config["model"]
        overrides = {theirs: section[ours] for ours, theirs in MODEL_FIELDS.items() if section[ours] is not None}
        preset = PRESETS[section["preset"]]()
        # at least the sequence length: load_config refused a max_position_embeddings below it
        overrides.setdefault("max_position_embeddings", max(preset.max_position_embeddings,
                                                            self.config["data"]["sequence_length"]))
        try:
            return PRESETS[section["preset"]](vocab_size=vocab_size, **overrides)
        except (TypeError, ValueError) as error:  # BERTConfig: TypeError for a wrong type, ValueError for a value
            raise ConfigError(f"model section: {error}") from error

    def _checkpoint_to_resume(self) -> Path | None:
        """The verified checkpoint to continue from; None to start at step 0, also when resume_from names this run's
        own checkpoint_dir before it holds a checkpoint (so one command both starts and resumes a run)."""
        training = self.config["training"]
        resume = training["resume_from"]
        if resume is None:
            return None
        if not resume.strip():
            raise ConfigError(f"training.resume_from is an empty path {resume!r}; give a checkpoint folder or a "
                              f"checkpoint_dir, or null.")
        own = training["checkpoint_dir"]
        if own is not None and _same_folder(resume, own) and ckpt.holds_no_checkpoint(own):
            logger.info("training.resume_from: %s holds no checkpoint yet; starting at step 0.", own)
            return None
        try:
            return ckpt.verify_checkpoint(resume)
        except (FileNotFoundError, ckpt.CheckpointError) as error:
            raise ConfigError(f"training.resume_from: {error}") from None

    def _tokenizer_to_save(self, resume: Path | None) -> str | None:
        """data.tokenizer_dir when this run will train a tokenizer and save it there (see build_tokenizer)."""
        data = self.config["data"]
        cache = data["tokenizer_dir"]
        if cache is None or data["corpus"] == SYNTHETIC_CORPUS or data["tokenizer"] != "train":
            return None
        if (Path(cache) / "vocab.txt").is_file() or (resume is not None and (resume / "vocab.txt").is_file()):
            return None
        return cache

    def check_output_paths(self, resume: Path | None = None) -> None:
        """Stop before any work when a place this run will write cannot be written (a ConfigError naming the key)."""
        training, log = self.config["training"], self.config["logging"]
        check_writable("training.checkpoint_dir", training["checkpoint_dir"], folder=True)
        check_writable("data.tokenizer_dir", self._tokenizer_to_save(resume), folder=True)
        check_writable("logging.file", log["file"], folder=False)
        check_writable("logging.metrics_file", log["metrics_file"], folder=False)

    def build_tokenizer(self, documents: list[str], resume: Path | None) -> BERTTokenizerFast:
        """The run's tokenizer: the resumed checkpoint's, a saved one, MiniLM's vocab, or WordPiece trained here.

        Rank 0 trains it (the same texts give the same vocabulary anywhere) and shares it with the other processes;
        `data.tokenizer_dir` keeps it for the next run.
        """
        data = self.config["data"]
        if resume is not None and (resume / "vocab.txt").is_file():
            return _saved_tokenizer(resume, "training.resume_from")
        choice, cache = data["tokenizer"], data["tokenizer_dir"]
        if choice == "minilm":
            from bertviz_lab.model.weights import BERT_Weights

            try:
                return BERTTokenizerFast.from_pretrained(BERT_Weights.ALL_MINILM_L6_V2.path)
            except ImportError as error:
                raise ConfigError(f"data.tokenizer: minilm: {error}") from error
        if choice != "train":
            return _saved_tokenizer(choice, "data.tokenizer")
        if cache is not None and (Path(cache) / "vocab.txt").is_file():
            return _saved_tokenizer(cache, "data.tokenizer_dir")
        tokenizer = None
        if self.dist.is_main:
            tokenizer = BERTTokenizerFast.train_from_texts(documents, vocab_size=data["vocab_size"],
                                                           model_max_length=data["sequence_length"])
            if cache is not None:
                tokenizer.save_pretrained(cache)
        return broadcast_object(tokenizer, self.dist)

    def build_data(self, resume: Path | None) -> tuple[Any, Any, int]:
        """(train data, test data or None, vocabulary size) for the configured corpus."""
        data = self.config["data"]
        micro = data["batch_size"] // self.config["training"]["gradient_accumulation_steps"]  # divides: build_trainer
        if data["corpus"] == SYNTHETIC_CORPUS:
            return (self._synthetic(data["num_train_batches"], micro, self.seed),
                    self._synthetic(data["num_test_batches"], micro, self.seed + 9999), data["vocab_size"])
        try:
            documents = load_documents(data["corpus"])
            train_docs, test_docs = split_documents(documents, data["test_fraction"], data["random_seed"])
        except (FileNotFoundError, ValueError, TypeError) as error:
            raise ConfigError(f"data.corpus: {error}") from error
        self.tokenizer = self.build_tokenizer(train_docs, resume)
        try:
            train = self._pairs(train_docs)
            test = self._pairs(test_docs) if test_docs else None
        except ValueError as error:
            raise ConfigError(f"data section: {error}") from error
        return train, test, len(self.tokenizer)

    def _synthetic(self, num_batches: int, rows: int, seed: int) -> list[dict[str, torch.Tensor]]:
        """The seed's synthetic batches (half MLM, half NSP pairs) in the Trainer's layout."""
        data = self.config["data"]
        batches = generate_synthetic_bert_batches(num_batches, rows, data["sequence_length"], data["vocab_size"],
                                                  data["mask_probability"], seed)
        return [synthetic_to_training_batch(batch) for batch in batches]

    def _pairs(self, documents: list[str]) -> SentencePairDataset:
        data = self.config["data"]
        return SentencePairDataset(documents, self.tokenizer, data["sequence_length"], seed=data["random_seed"],
                                   short_seq_prob=data["short_seq_prob"])

    def _steps(self, train: Any) -> int:
        training, data = self.config["training"], self.config["data"]
        micro = data["batch_size"] // training["gradient_accumulation_steps"]
        pairs = None if isinstance(train, list) else len(train.examples(0))
        if pairs is not None and pairs < micro:
            raise ConfigError(f"data.batch_size={data['batch_size']} asks for more pairs per micro-batch ({micro}) "
                              f"than the corpus makes in an epoch ({pairs}); lower the batch size or add text.")
        if training["steps"] is not None:
            return training["steps"]
        batches = len(train) if pairs is None else pairs // micro
        per_epoch = batches // training["gradient_accumulation_steps"]
        if per_epoch < 1:
            raise ConfigError(f"one epoch holds fewer than one optimizer step of data.batch_size="
                              f"{data['batch_size']}; lower the batch size or set training.steps.")
        return per_epoch * (training["epochs"] or DEFAULT_EPOCHS)

    # the run ---------------------------------------------------------------------------------------------
    def build_trainer(self) -> Trainer:
        """Everything run() trains with, ready to fit() or start(): process group, data, tokenizer, model, Trainer."""
        training = self.config["training"]
        try:
            device = select_device(training["device"])
        except (TypeError, ValueError) as error:
            raise ConfigError(f"training.device: {error}") from error
        if training["num_threads"] is not None:
            torch.set_num_threads(training["num_threads"])
        resume = self._checkpoint_to_resume()
        self.check_output_paths(resume)
        self.train_config(self.config["training"]["steps"] or 1)  # the Trainer's checks across keys, before any work
        self.dist = init_distributed(device.type)
        self.train_data, self.test_data, vocab_size = self.build_data(resume)
        train_config = self.train_config(self._steps(self.train_data))
        torch.manual_seed(self.seed)
        model = BERTForPreTraining(self.model_config(vocab_size))
        try:
            self.trainer = Trainer(model, self.train_data, self.test_data, train_config, tokenizer=self.tokenizer)
        except ImportError as error:  # a logger whose package is missing (logging.log_to)
            raise ConfigError(f"logging.log_to: {error}") from None
        if resume is not None:
            try:
                self.trainer.load_checkpoint(resume, verify=False)  # verified before the data was built
            except ckpt.CheckpointError as error:
                raise ConfigError(f"training.resume_from: {error}") from None
        return self.trainer

    def run(self) -> dict[str, Any]:
        """Build everything, train, evaluate on the held-out data, return the results (see the class docstring)."""
        trainer = self.build_trainer()
        level = logger.level
        handler = self._log_to_file()
        try:
            steps_before = trainer.step
            started = time.perf_counter()
            trainer.fit()
            seconds = time.perf_counter() - started
            final = trainer.evaluate() if self.test_data else {}
            return self._results(trainer, final, seconds, trainer.step - steps_before, self.train_data,
                                 self.test_data)
        finally:
            logger.setLevel(level)  # logging.level is this run's, not the process's
            if handler is not None:
                logger.removeHandler(handler)
                handler.close()

    @staticmethod
    def _results(trainer: Trainer, final: dict[str, Any], seconds: float, steps_run: int, train: Any,
                 test: Any) -> dict[str, Any]:
        history = trainer.history
        window = history[-final_window(len(history)):]
        return {
            "train_mlm_loss": _mean(window, "train_mlm_loss"),
            "train_nsp_loss": _mean(window, "train_nsp_loss"),
            "test_mlm_loss": final.get("eval_mlm_loss"),
            "test_nsp_loss": final.get("eval_nsp_loss"),
            "test_nsp_accuracy": final.get("eval_nsp_accuracy"),
            "test_mlm_accuracy": final.get("eval_mlm_accuracy"),
            "initial_train_mlm_loss": next((r["train_mlm_loss"] for r in history if "train_mlm_loss" in r), None),
            "initial_train_nsp_loss": history[0].train_nsp_loss if history else None,
            "steps": trainer.step,
            "seconds": seconds,
            "steps_per_second": steps_run / seconds if seconds > 0 else None,
            "sequences_per_second": steps_run * trainer.config.batch_size / seconds if seconds > 0 else None,
            "num_parameters": trainer.model.num_parameters(),
            "vocab_size": trainer.model.config.vocab_size,
            "train_pairs": _count_pairs(train),
            "test_pairs": _count_pairs(test),
            "device": str(trainer.device),
            "precision": trainer.precision,
            "world_size": trainer.dist.world_size,
            "checkpoint": str(trainer.last_checkpoint) if trainer.last_checkpoint is not None else None,
            "stop_reason": trainer.stop_reason,
        }

    def _log_to_file(self) -> logging.Handler | None:
        log = self.config["logging"]
        logger.setLevel(log["level"])
        if log["file"] is None or not self.dist.is_main:
            return None
        Path(log["file"]).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log["file"], encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
        logger.addHandler(handler)
        return handler

    def close(self) -> None:
        """Leave the process group this run joined (after run())."""
        if self.trainer is not None:
            self.trainer.close()


# the train command ----------------------------------------------------------------------------------------
def add_train_parser(commands: Any) -> argparse.ArgumentParser:
    """`bertviz-lab train`'s arguments, as a subcommand of the CLI (bertviz_lab/cli.py)."""
    train = commands.add_parser("train", help="pretrain BERT (MLM + NSP) from a YAML config",
                                description="Pretrain BERT on MLM + NSP as a YAML file describes; prints the "
                                            "results and writes them as JSON. Runs under torchrun as well.")
    train.add_argument("--config", required=True, metavar="PRESET_OR_FILE",
                       help=f"a shipped preset ({', '.join(preset_names())}) or a YAML file with "
                            "data/model/training/logging sections")
    train.add_argument("--output", help="write the results dict here as JSON")
    train.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                       help="override one config key (value read as YAML); repeatable")
    train.add_argument("--log", choices=("tensorboard",), help="also log to TensorBoard (logging.log_to; event "
                       "files in logging.log_dir, by default TensorBoard's runs/<date>_<host>)")
    return train


def format_results(results: Mapping[str, Any]) -> str:
    lines = ["", "Final Results:", "=" * 40]
    for key, value in results.items():
        lines.append(f"  {key}: {value:.6f}" if isinstance(value, float) else f"  {key}: {value}")
    return "\n".join(lines)


def _one_line(error: BaseException) -> str:
    """An error's message on one line, as the CLI promises."""
    return " ".join(str(error).split())


def write_results(results: Mapping[str, Any], output: Path) -> int:
    """Write the results JSON; 0, or 1 with a one-line error when the file cannot be written after all."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        print(f"bertviz-lab train: error: --output={clip(str(output))} could not be written after training "
              f"({error.strerror or error}); the results are printed above.", file=sys.stderr)
        return 1
    print(f"\nresults written to {output}")
    return 0


def interrupted_line(error: TrainingInterrupted, training: Mapping[str, Any]) -> str:
    """What the CLI prints for Ctrl-C or SIGTERM: where the work is kept, and how to go on from it."""
    if error.checkpoint is None:
        return f"bertviz-lab train: {_run_config_names(str(error))}"
    folder = error.checkpoint.parent
    target = folder if ckpt.latest_checkpoint(folder) == error.checkpoint else error.checkpoint
    same = training["resume_from"] is not None and _resumes_from(training["resume_from"], error.checkpoint)
    how = "the same command" if same else f"the same command and --set training.resume_from={target}"
    return f"bertviz-lab train: {error}; resume with {how}"


def _resumes_from(resume_from: str, checkpoint: Path) -> bool:
    """True when `resume_from` leads to `checkpoint` (a folder itself, or its checkpoint_dir's latest)."""
    try:
        return ckpt.resolve_checkpoint(resume_from).resolve() == checkpoint.resolve()
    except (OSError, ValueError):
        return False


def run_train(args: argparse.Namespace) -> int:
    """`bertviz-lab train --config CFG.yaml --output results.json`; exit 0 ok, 1 training failed, 2 bad config,
    128 + the signal's number on Ctrl-C (130) or SIGTERM (143).

    Every error is one line on stderr: `bertviz-lab train: error: ...` (exit 2: the config, a path it names, the
    checkpoint to resume; exit 1: a non-finite loss, or an OS error while training, e.g. a full disk). Ctrl-C or
    SIGTERM while training ends after the step in flight with a checkpoint saved (see Trainer.fit); at any other
    time, or the second time, it stops at once. Either way one line says what was kept."""
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger.addHandler(stream)
    runner = None

    def stop_at_once(signal_number: int, frame: Any) -> None:
        trainer = runner.trainer if runner is not None else None
        raise TrainingInterrupted(signal_number, trainer.step if trainer else 0,
                                  trainer.last_checkpoint if trainer else None, at_once=True)

    try:
        with interrupt_handlers(stop_at_once):
            runner = BertRunner(args.config, overrides=args.set + ([f"logging.log_to={args.log}"] if args.log else []))
            check_writable("--output", args.output, folder=False)
            results = runner.run()
        if runner.dist.is_main:
            print(format_results(results))
            if args.output:
                return write_results(results, Path(args.output))
        return 0
    except TrainingInterrupted as error:
        if runner is None:  # while the config was read
            print(f"bertviz-lab train: {error}", file=sys.stderr)
        elif runner.dist.is_main:
            print(interrupted_line(error, runner.config["training"]), file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:  # raised by other code than these handlers
        print("bertviz-lab train: interrupted; nothing more was saved.", file=sys.stderr)
        return 130
    except (ConfigError, FolderInUse) as error:  # FolderInUse: another run writes training.checkpoint_dir
        print(f"bertviz-lab train: error: {_one_line(error)}", file=sys.stderr)
        return 2
    except NonFiniteLossError as error:
        print(f"bertviz-lab train: {_run_config_names(_one_line(error))}", file=sys.stderr)
        return 1
    except OSError as error:  # e.g. the disk filled up while a checkpoint was written
        print(f"bertviz-lab train: error: {_one_line(error)}", file=sys.stderr)
        return 1
    finally:
        logger.removeHandler(stream)
        if runner is not None:
            runner.close()
