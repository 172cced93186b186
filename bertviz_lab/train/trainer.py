"""Trainer: BERT pretraining you can watch (callbacks, progress bar, background thread), resume and scale out.

One optimizer step = `gradient_accumulation_steps` micro-batches on each of the torchrun processes. Losses are
normalised by the predictions of the whole global batch, so a run on N processes follows the same path as one
process with the same global batch. AdamW with linear warmup and linear decay, gradient clipping, bf16/fp16
autocast on CUDA (bf16 also on CPUs that compute it natively), optional torch.compile, DistributedDataParallel
under torchrun (rank 0 writes checkpoints and logs), evaluation every `eval_interval` steps, and atomic checkpoints
that resume bit-exactly on CPU.
Ctrl-C or SIGTERM ends a fit() after the step in flight with a checkpoint (a second signal ends it at once); a step
that goes NaN/inf is a NonFiniteLossError naming the step, what went wrong and the last good checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import random
import signal
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from bertviz_lab.device import select_device
from bertviz_lab.kernels import machine
from bertviz_lab.model.heads import BERTForPreTraining
from bertviz_lab.train import checkpoint as ckpt
from bertviz_lab.train import schema
from bertviz_lab.train.data import FixedBatches, PairBatches, SentencePairDataset, evaluation_batches
from bertviz_lab.train.metrics import MetricsRecord, append_record, rewrite_records
from bertviz_lab.train.objective import MODEL_INPUTS, PretrainingObjective, prediction_targets
from bertviz_lab.train.progress import log_above
from bertviz_lab.train.schema import run_setting
from bertviz_lab.train.tensorboard_log import TensorBoardLog
from bertviz_lab.util.distributed import (
    DistributedContext,
    all_reduce_sum,
    any_process,
    barrier,
    close_distributed,
    gather_objects,
    init_distributed,
    largest,
    launched_by_torchrun,
)
from bertviz_lab.util.fields import Field, check_fields, setting
from bertviz_lab.util.files import FolderInUse, clip, one_writer, shown
from bertviz_lab.util.interrupts import interrupt_handlers
from bertviz_lab.util.paths import file_problem, folder_problem

logger = logging.getLogger("bertviz_lab.train")

Callback = Callable[[MetricsRecord], Any]
TrainData = SentencePairDataset | Sequence[dict[str, torch.Tensor]]


@dataclass
class TrainConfig:
    """How to train; every field is checked on creation with an error naming it. A field the YAML run config also
    sets takes its default and check from that key (train/schema.py): one default per setting."""

    max_steps: int = setting(Field(int, 1000, ge=1))  # optimizer steps of the whole run (the LR decays to 0 here)
    batch_size: int = run_setting("data.batch_size")  # sequences per step, over processes and accumulation steps
    gradient_accumulation_steps: int = run_setting("training.gradient_accumulation_steps")
    learning_rate: float = run_setting("training.learning_rate")
    weight_decay: float = run_setting("training.weight_decay")  # not applied to biases and LayerNorm weights
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_epsilon: float = setting(Field(float, 1e-6, ge=0.0))
    warmup_steps: int = run_setting("training.warmup_steps")
    max_grad_norm: float | None = run_setting("training.max_grad_norm")  # None: no clipping
    mlm_weight: float = run_setting("training.mlm_loss_weight")
    nsp_weight: float = run_setting("training.nsp_loss_weight")
    mlm_probability: float = run_setting("data.mask_probability")
    precision: str = run_setting("training.precision")  # auto (bf16/fp16 on CUDA, fp32 elsewhere) | fp32 | bf16 | fp16
    compile: bool = run_setting("training.compile")  # torch.compile the training step
    device: str = run_setting("training.device")
    # data order, masking, dropout; the run config's training.seed, whose default is data.random_seed's
    seed: int = run_setting("training.seed", default=schema.key("data.random_seed").default, nullable=False)
    eval_interval: int = run_setting("training.eval_interval")  # every N steps (0: only when evaluate() is called)
    log_interval: int = run_setting("logging.log_interval")  # log a line every N steps (0: never)
    checkpoint_dir: str | None = run_setting("training.checkpoint_dir")  # None: no checkpoints
    checkpoint_interval: int = run_setting("training.checkpoint_interval")  # every N steps (0: at the end and stop())
    keep_checkpoints: int = run_setting("training.keep_checkpoints")  # newest checkpoints kept; older ones deleted
    metrics_file: str | None = run_setting("logging.metrics_file")  # JSON lines, one per step, written by rank 0
    log_to: str | None = run_setting("logging.log_to")  # "tensorboard": event files in log_dir, written by rank 0
    log_dir: str | None = run_setting("logging.log_dir")  # None: TensorBoard's runs/<date>_<host>
    progress: bool = run_setting("logging.progress")  # tqdm progress bar on rank 0

    def __post_init__(self) -> None:
        self.adam_betas = tuple(self.adam_betas)  # type: ignore[assignment]
        for name in ("checkpoint_dir", "metrics_file", "log_dir"):  # plain strings: the checkpoint keeps this config
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        self.validate()

    def validate(self) -> None:
        """Raise a ValueError (or TypeError) naming the first field that cannot work."""
        for name in ("checkpoint_dir", "metrics_file"):  # a str or an os.PathLike (made a str) from Python
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"TrainConfig.{name} must be a path (str) or None, got {shown(value)}.")
        check_fields(self, "TrainConfig")
        if len(self.adam_betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in self.adam_betas):
            raise ValueError(f"TrainConfig.adam_betas must be two numbers in [0, 1), got {self.adam_betas!r}.")
        if self.batch_size % self.gradient_accumulation_steps:
            raise ValueError(f"TrainConfig.batch_size ({self.batch_size}) must be divisible by "
                             f"gradient_accumulation_steps ({self.gradient_accumulation_steps}).")
        if self.warmup_steps > self.max_steps:
            raise ValueError(f"TrainConfig.warmup_steps ({self.warmup_steps}) exceeds max_steps ({self.max_steps}).")
        for name, meaning in (("checkpoint_dir", "no checkpoints"), ("metrics_file", "no metrics file")):
            value = getattr(self, name)
            if value is not None and not value.strip():
                raise ValueError(f"TrainConfig.{name} is an empty path {value!r}, which would write into the current "
                                 f"folder; give a path, or None for {meaning}.")
        if self.checkpoint_interval and self.checkpoint_dir is None:
            raise ValueError(f"TrainConfig.checkpoint_interval={self.checkpoint_interval} needs "
                             f"TrainConfig.checkpoint_dir (where the checkpoints go); set it, or set "
                             f"checkpoint_interval to 0.")


def run_config_keys() -> dict[str, str]:
    """TrainConfig field -> the run config key that sets it (error messages of the runner name the key)."""
    return {f.name: f.metadata["key"] for f in dataclasses.fields(TrainConfig) if "key" in f.metadata}


class NonFiniteLossError(FloatingPointError):
    """The loss, the gradients or the updated parameters became NaN or infinite (or the update overflowed); no
    checkpoint was written for that step, and the message names the last good one."""


class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT (Ctrl-C) or SIGTERM ended fit(): at a step boundary, its checkpoint saved when checkpoint_dir is set,
    or at once (`at_once`: a second signal; nothing half-written is left, `checkpoint` is the last one saved before).

    `step`: the steps done (the checkpoint's step); `exit_code`: 128 + the signal's number, as a shell reports it."""

    def __init__(self, signal_number: int, step: int, checkpoint: Path | None, at_once: bool = False) -> None:
        self.signal_number, self.step, self.checkpoint, self.at_once = signal_number, step, checkpoint, at_once
        name = signal.Signals(signal_number).name
        if at_once:
            kept = (f"nothing more was saved, the last checkpoint is {checkpoint}" if checkpoint is not None
                    else "nothing was saved")
            message = f"stopped at once by {name} with {step} steps done; {kept}"
        elif checkpoint is not None:
            message = f"interrupted by {name} at step {step}; checkpoint saved to {checkpoint}"
        else:
            message = (f"interrupted by {name} at step {step}; nothing was saved (set TrainConfig.checkpoint_dir "
                       f"to keep checkpoints)")
        super().__init__(message)

    @property
    def exit_code(self) -> int:
        return 128 + self.signal_number


REPEAT_GRACE_S = 1.0  # a repeat within this time is the same request (torchrun forwards a Ctrl-C its workers got)


class StepBoundarySignals:
    """While installed (main thread only), the first SIGINT/SIGTERM asks the loop to end after the step in flight,
    and a second one (after REPEAT_GRACE_S) raises TrainingInterrupted(at_once=True) wherever the trainer is."""

    def __init__(self, trainer: "Trainer") -> None:
        self.trainer = trainer
        self.received: int | None = None
        self._first_at = 0.0

    def _handle(self, signal_number: int, frame: Any) -> None:
        if self.received is None:
            self.received, self._first_at = signal_number, time.monotonic()
        elif time.monotonic() - self._first_at >= REPEAT_GRACE_S:
            raise TrainingInterrupted(signal_number, self.trainer.step, self.trainer.last_checkpoint, at_once=True)

    def installed(self) -> contextlib.AbstractContextManager[None]:
        """This object's handlers for the block (see interrupt_handlers)."""
        self.received = None
        return interrupt_handlers(self._handle)


def resolve_precision(precision: str, device: torch.device) -> str:
    """"auto" -> bf16 (fp16 without bf16 support) on CUDA, fp32 elsewhere (bf16 on a CPU is asked for: it is only
    faster with AMX). bf16 on a CPU runs where the CPU computes it natively (AMX, AVX-512 BF16, Arm BF16) and is
    refused in one line elsewhere; fp16 is for CUDA only."""
    if precision == "auto":
        if device.type != "cuda":
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if precision == "bf16" and device.type == "cpu":
        refusal = machine.bf16_refusal(device)
        if refusal is not None:
            raise ValueError(f"precision='bf16': {refusal}")
        caution = machine.bf16_caution(device)
        if caution is not None:
            warnings.warn(f"precision='bf16': {caution}", stacklevel=3)
        return precision
    if precision in ("bf16", "fp16") and device.type != "cuda":
        raise ValueError(f"precision={precision!r} needs a CUDA device{' or a CPU' if precision == 'bf16' else ''}"
                         f" (fp16 mixed precision runs on CUDA only), but training runs on {device}; use 'fp32' or "
                         "'auto'.")
    return precision


def warmup_then_linear_decay(warmup_steps: int, max_steps: int) -> Callable[[int], float]:
    """LR factor for step s: rises linearly over the warmup, then falls linearly to 0 at max_steps."""
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (max_steps - step) / max(1, max_steps - warmup_steps))
    return factor


def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices and embeddings; leave biases and LayerNorm weights (1-D tensors) alone."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for parameter in model.parameters():  # tied weights appear once
        if parameter.requires_grad:
            (decay if parameter.dim() >= 2 else no_decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def check_output_paths(config: TrainConfig) -> None:
    """ValueError naming the field when checkpoint_dir or metrics_file could not be written: found before any step."""
    for name, path, problem_of in (("checkpoint_dir", config.checkpoint_dir, folder_problem),
                                   ("metrics_file", config.metrics_file, file_problem)):
        problem = None if path is None else problem_of(path)
        if problem is not None:
            raise ValueError(f"TrainConfig.{name}={clip(str(path))} {problem}")


def _short(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _non_finite_names(tensors: Iterable[tuple[str, torch.Tensor | None]]) -> list[str]:
    """The names of the tensors (e.g. parameters or their gradients) that hold a NaN or an infinity."""
    return [name for name, tensor in tensors if tensor is not None and not bool(torch.isfinite(tensor).all())]


def _listed(names: list[str], limit: int = 3) -> str:
    """`a, b, c and 4 more`: a few names for a one-line message."""
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


class Trainer:
    """Pretrains a BERTForPreTraining on MLM + NSP; `fit()` in the foreground or `start()`/`stop()` in the background.

    train_data / eval_data: a SentencePairDataset (pairs are masked dynamically as they are drawn), or a list of
    ready batch dicts (input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels; each one micro-batch of
    batch_size / gradient_accumulation_steps rows), e.g. from `synthetic_to_training_batch`.
    Callbacks get a MetricsRecord after every step, on rank 0, in the training thread; a callback with an
    `on_train_end(trainer)` method is also told when a fit() ends (finished, stopped, interrupted or failed; see
    stop_reason).
    The Trainer seeds torch and `random` with seed + rank (dropout); the model's initial weights are the caller's.
    A step with no masked position in its whole global batch gives train_mlm_loss = train_mlm_accuracy = None and
    train_loss = nsp_weight * train_nsp_loss (see MetricsRecord); a micro-batch without one adds nothing to the MLM sum.
    """

    def __init__(self, model: BERTForPreTraining, train_data: TrainData, eval_data: TrainData | None = None,
                 config: TrainConfig | None = None, *, callbacks: Iterable[Callback] = (), tokenizer: Any = None,
                 resume_from: str | Path | None = None) -> None:
        if not isinstance(model, BERTForPreTraining):
            raise TypeError(f"Trainer trains a BERTForPreTraining, got {type(model).__name__}.")
        config = TrainConfig() if config is None else config
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}.")
        self.config, self.tokenizer = config, tokenizer
        check_output_paths(config)
        self.callbacks: list[Callback] = list(callbacks)
        for callback in self.callbacks:
            if not callable(callback):
                raise TypeError(f"every callback must be callable, got {callback!r}.")

        device = select_device(config.device)
        if launched_by_torchrun() and device.type == "cuda":
            device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}")
        self.dist: DistributedContext = init_distributed(device.type)
        self.device = device
        self.precision = resolve_precision(config.precision, device)
        self._autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)
        micro_global = config.batch_size // config.gradient_accumulation_steps
        if micro_global % self.dist.world_size:
            raise ValueError(f"TrainConfig.batch_size ({config.batch_size}) / gradient_accumulation_steps "
                             f"({config.gradient_accumulation_steps}) = {micro_global} sequences per micro-batch "
                             f"cannot be split over {self.dist.world_size} processes.")
        self.micro_batch_size = micro_global // self.dist.world_size  # rows per process per micro-batch

        torch.manual_seed(config.seed + self.dist.rank)  # dropout; the model was initialised by the caller
        random.seed(config.seed + self.dist.rank)
        self.model = model.to(device)
        self.model.train()
        self.objective = PretrainingObjective(self.model)
        self._ddp = None
        if self.dist.is_distributed:
            self._ddp = DistributedDataParallel(self.objective,
                                                device_ids=[device.index] if device.type == "cuda" else None)
        step_module: torch.nn.Module = self._ddp if self._ddp is not None else self.objective
        self._step_module = torch.compile(step_module) if config.compile else step_module
        self.optimizer = torch.optim.AdamW(parameter_groups(self.model, config.weight_decay), lr=config.learning_rate,
                                           betas=config.adam_betas, eps=config.adam_epsilon)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, warmup_then_linear_decay(config.warmup_steps, config.max_steps))
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None

        self.train_batches = self._stream(train_data, micro_global)
        self._eval_data = eval_data
        self._eval_batches: list[dict[str, torch.Tensor]] | None = None

        if config.log_to == "tensorboard" and self.dist.is_main:
            self.callbacks.append(TensorBoardLog(config.log_dir, self.model, self._attention_probe))

        self.step = 0
        self.history: list[MetricsRecord] = []
        self.last_checkpoint: Path | None = None
        self.stop_reason: str | None = None
        self.error: BaseException | None = None
        self._elapsed_before = 0.0
        self._stop = threading.Event()
        self._signals = StepBoundarySignals(self)
        self._thread: threading.Thread | None = None
        if resume_from is not None:
            self.load_checkpoint(resume_from)

    # data ------------------------------------------------------------------------------------------------
    def _stream(self, data: TrainData, micro_global: int) -> Any:
        rank, world = self.dist.rank, self.dist.world_size
        if isinstance(data, SentencePairDataset):
            return PairBatches(data, micro_global, mlm_probability=self.config.mlm_probability, seed=self.config.seed,
                               rank=rank, world_size=world)
        if isinstance(data, (list, tuple)):
            for index, batch in enumerate(data):
                rows = batch["input_ids"].shape[0] if isinstance(batch, dict) and "input_ids" in batch else None
                if rows != micro_global:
                    raise ValueError(f"train_data[{index}] has {rows} rows, but batch_size / "
                                     f"gradient_accumulation_steps = {micro_global}; each ready batch is one global "
                                     f"micro-batch.")
            return FixedBatches(data, rank=rank, world_size=world)
        if hasattr(data, "__next__"):
            return data  # a caller-made stream, already this process' share
        raise TypeError(f"train_data must be a SentencePairDataset or a list of batch dicts, "
                        f"got {type(data).__name__}.")

    def _prepare(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Flat MLM targets computed on the CPU, then everything moved to the device."""
        positions, targets = prediction_targets(batch["mlm_labels"])
        inputs = {**{k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask", "nsp_labels")},
                  "mlm_positions": positions, "mlm_targets": targets}
        non_blocking = self.device.type == "cuda"
        return {k: inputs[k].to(self.device, non_blocking=non_blocking) for k in MODEL_INPUTS}

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self._autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self._autocast_dtype)

    # one step --------------------------------------------------------------------------------------------
    def _train_step(self, clock_start: float) -> MetricsRecord:
        config, world = self.config, self.dist.world_size
        micro = [self._prepare(next(self.train_batches)) for _ in range(config.gradient_accumulation_steps)]
        counts = torch.tensor([float(sum(m["mlm_positions"].numel() for m in micro)),
                               float(sum(m["nsp_labels"].numel() for m in micro))],
                              dtype=torch.float64, device=self.device)
        all_reduce_sum(counts, self.dist)
        n_mlm, n_nsp = (max(1.0, c) for c in counts.tolist())
        totals = torch.zeros(4, dtype=torch.float64, device=self.device)
        for index, inputs in enumerate(micro):
            last = index == len(micro) - 1
            sync = contextlib.nullcontext() if (self._ddp is None or last) else self._ddp.no_sync()
            with sync:
                with self._autocast():
                    mlm_sum, nsp_sum, mlm_correct, nsp_correct = self._step_module(**inputs)
                # x world: DDP averages gradients over processes, we want their sum over the global batch
                loss = (config.mlm_weight * mlm_sum / n_mlm + config.nsp_weight * nsp_sum / n_nsp) * world
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            totals += torch.stack([mlm_sum.detach(), nsp_sum.detach(), mlm_correct, nsp_correct]).double()
        all_reduce_sum(totals, self.dist)
        mlm_sum_total, nsp_sum_total, mlm_correct_total, nsp_correct_total = totals.tolist()
        has_mlm = counts[0].item() > 0  # a batch may hold no masked position (e.g. synthetic NSP-only batches)
        mlm_loss = mlm_sum_total / n_mlm if has_mlm else None
        nsp_loss = nsp_sum_total / n_nsp
        if not (math.isfinite(mlm_sum_total) and math.isfinite(nsp_loss)):
            self.optimizer.zero_grad(set_to_none=True)
            raise self._non_finite(f"the loss became non-finite (train_mlm_loss={mlm_sum_total / n_mlm}, "
                                   f"train_nsp_loss={nsp_loss})", applied=False)
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        max_norm = config.max_grad_norm if config.max_grad_norm is not None else float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
        if not math.isfinite(grad_norm) and self.scaler is None:  # fp16's scaler skips such a step by itself
            names = _non_finite_names((name, p.grad) for name, p in self.model.named_parameters())
            if names:  # (finite gradients whose norm overflows float32 are clipped to 0, not a failure)
                self.optimizer.zero_grad(set_to_none=True)
                raise self._non_finite(f"the gradients of {_listed(names)} became NaN/inf", applied=False)
        lr = float(self.scheduler.get_last_lr()[0])  # a float here; typed float | Tensor by torch
        self._apply_update()
        loaded = getattr(self.model, "load_report", None)
        if loaded is not None:  # its randomly initialised head is being learned now: figures stop calling it untrained
            loaded.trained = True
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return MetricsRecord(
            step=self.step, train_loss=config.mlm_weight * (mlm_loss or 0.0) + config.nsp_weight * nsp_loss,
            train_mlm_loss=mlm_loss, train_nsp_loss=nsp_loss,
            train_mlm_accuracy=mlm_correct_total / n_mlm if has_mlm else None,
            train_nsp_accuracy=nsp_correct_total / n_nsp, lr=lr, grad_norm=grad_norm,
            time=self._elapsed_before + time.perf_counter() - clock_start)

    def _apply_update(self) -> None:
        """The optimizer step; an update that overflows or leaves a parameter NaN/inf is a NonFiniteLossError."""
        try:
            if self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
        except RuntimeError as error:  # AdamW: "value cannot be converted to type float without overflow"
            if "overflow" not in str(error):
                raise
            raise self._non_finite(f"the optimizer's update overflowed ({clip(str(error), 120)})",
                                   applied=True) from None
        parameters = [(name, p.detach()) for name, p in self.model.named_parameters()]
        sums = torch.stack([p.sum().float() for _, p in parameters])  # NaN/inf anywhere makes its sum NaN/inf
        if not bool(torch.isfinite(sums).all()):  # (a sum also overflows for huge finite values: look closer)
            names = _non_finite_names(parameters)
            if names:
                raise self._non_finite(f"the update made {_listed(names)} NaN/inf", applied=True)

    def _non_finite(self, what: str, applied: bool) -> NonFiniteLossError:
        """The error for a step that went non-finite: what did, what is kept, what to try; it depends on the config."""
        step = self.step + 1
        state = ("its update was applied, so the model in memory is no longer usable" if applied
                 else "that step was not applied")
        if self.last_checkpoint is not None:
            where = f"the last good checkpoint is {self.last_checkpoint}"
        elif self.config.checkpoint_dir is not None:
            where = f"no checkpoint was written yet in {clip(self.config.checkpoint_dir)}"
        else:
            where = "no checkpoint was written (set TrainConfig.checkpoint_dir to keep checkpoints)"
        return NonFiniteLossError(
            f"training stopped: at step {step} {what}; {state} and nothing was saved for it; {where}. Try a lower "
            f"learning_rate (now {self.config.learning_rate:g}), a smaller max_grad_norm, or precision='fp32'.")

    # evaluation ------------------------------------------------------------------------------------------
    def _evaluation_batches(self) -> list[dict[str, torch.Tensor]]:
        if self._eval_batches is None:
            if self._eval_data is None:
                raise ValueError("this Trainer has no eval_data; pass eval_data= to evaluate held-out pairs.")
            self._eval_batches = evaluation_batches(
                self._eval_data, self.config.batch_size // self.config.gradient_accumulation_steps,
                mlm_probability=self.config.mlm_probability, seed=self.config.seed + 1,
                rank=self.dist.rank, world_size=self.dist.world_size)
        return self._eval_batches

    def _attention_probe(self) -> tuple[torch.Tensor, ...] | None:
        """The first held-out sequence (this rank's), unpadded: the sentence TensorBoard's attention image shows."""
        if self._eval_data is None:
            return None
        batch = self._evaluation_batches()[0]
        length = int(batch["attention_mask"][0].sum())
        return tuple(batch[key][:1, :length] for key in ("input_ids", "token_type_ids", "attention_mask"))

    def _check_not_running(self, action: str) -> None:
        """Refuse to touch the model from outside while the background thread trains it."""
        if self.is_running and threading.current_thread() is not self._thread:
            raise RuntimeError(f"cannot {action} while training runs in the background; call stop() first.")

    @torch.no_grad()
    def evaluate(self) -> dict[str, float | None]:
        """MLM/NSP loss and accuracy on the held-out data (masked once with a fixed seed), over all processes.

        The MLM values are None when the held-out batches hold no masked position."""
        self._check_not_running("evaluate()")
        was_training = self.model.training
        self.model.eval()
        totals = torch.zeros(6, dtype=torch.float64, device=self.device)
        try:
            for batch in self._evaluation_batches():
                inputs = self._prepare(batch)
                with self._autocast():
                    outputs = self.objective(**inputs)
                counts = [inputs["mlm_positions"].numel(), inputs["nsp_labels"].numel()]
                totals += torch.tensor([float(o) for o in outputs] + counts, dtype=torch.float64, device=self.device)
        finally:
            self.model.train(was_training)
        all_reduce_sum(totals, self.dist)
        mlm_loss, nsp_loss, mlm_correct, nsp_correct, n_mlm, n_nsp = totals.tolist()
        n_nsp = max(n_nsp, 1.0)
        return {"eval_mlm_loss": mlm_loss / n_mlm if n_mlm else None, "eval_nsp_loss": nsp_loss / n_nsp,
                "eval_mlm_accuracy": mlm_correct / n_mlm if n_mlm else None, "eval_nsp_accuracy": nsp_correct / n_nsp}

    # the loop --------------------------------------------------------------------------------------------
    def _target_step(self, steps: int | None) -> int:
        if steps is None:
            return self.config.max_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"steps must be an int >= 0, got {steps!r}.")
        if self.step + steps > self.config.max_steps:
            raise ValueError(f"fit({steps}) from step {self.step} would pass TrainConfig.max_steps="
                             f"{self.config.max_steps}, where the learning rate reaches 0; raise max_steps.")
        return self.step + steps

    def fit(self, steps: int | None = None) -> list[MetricsRecord]:
        """Train `steps` more optimizer steps (default: up to max_steps); returns this call's records.

        Ends early, after a whole step, when stop() is called. Saves a checkpoint at the end when checkpoint_dir is
        set. A NaN/inf loss raises NonFiniteLossError and leaves the last good checkpoint as it was.
        Called on the main thread, SIGINT (Ctrl-C) or SIGTERM also ends it after the step in flight: the checkpoint
        is saved, then TrainingInterrupted is raised; a second signal raises it at once (see StepBoundarySignals).
        """
        self._check_not_running("fit()")
        target = self._target_step(steps)
        try:
            with self._signals.installed(), self._writing_checkpoint_dir():
                return self._fit_until(target)
        except TrainingInterrupted:
            self.stop_reason = "interrupted"
            raise
        finally:
            self._notify_end()

    @contextlib.contextmanager
    def _writing_checkpoint_dir(self) -> Iterator[None]:
        """Rank 0 holds checkpoint_dir's writer lock for the block (nothing where there is none): a second training
        into the same folder stops before its first step, naming the first, on every process of it, instead of
        pruning the first's checkpoints."""
        folder = self.config.checkpoint_dir
        if folder is None:
            yield
            return
        with contextlib.ExitStack() as held:
            refused: Exception | None = None
            if self.dist.is_main:
                try:
                    held.enter_context(one_writer(folder, "training"))
                except FolderInUse as error:
                    refused = error
            if any_process(refused is not None, self.dist, self.device):
                raise refused or FolderInUse(f"TrainConfig.checkpoint_dir={clip(str(folder))} is being written by "
                                             "another training run (rank 0 says which).")
            yield

    def _fit_until(self, target: int) -> list[MetricsRecord]:
        records: list[MetricsRecord] = []
        bar = tqdm(total=target, initial=self.step, desc="pretraining", unit="step", dynamic_ncols=True,
                   disable=not (self.config.progress and self.dist.is_main))
        clock_start = time.perf_counter()
        self.stop_reason = None
        try:
            with log_above(bar, logger):
                self._loop(target, bar, clock_start, records)
        finally:
            bar.close()
            self._elapsed_before += time.perf_counter() - clock_start
            self._stop.clear()
        signal_number = largest(self._signals.received or 0, self.dist, self.device)  # one process' signal: all stop
        if signal_number and self.stop_reason == "stopped":
            self.stop_reason = "interrupted"
        if self.config.checkpoint_dir is not None:
            self.save_checkpoint()
        if signal_number:
            raise TrainingInterrupted(signal_number, self.step,
                                      self.last_checkpoint if self.config.checkpoint_dir is not None else None)
        return records

    def _loop(self, target: int, bar: Any, clock_start: float, records: list[MetricsRecord]) -> None:
        """Steps until `target` or stop(); each record goes to the history, `records`, the bar and the callbacks."""
        while self.step < target:
            if any_process(self._stop.is_set() or self._signals.received is not None, self.dist, self.device):
                self.stop_reason = "stopped"
                break
            try:
                record = self._train_step(clock_start)
            except NonFiniteLossError:
                self.stop_reason = "non-finite loss"
                raise
            if self.config.eval_interval and self.step % self.config.eval_interval == 0 \
                    and self._eval_data is not None:
                evaluated: dict[str, Any] = self.evaluate()  # the eval_* fields, by name
                record = dataclasses.replace(record, **evaluated)
            self.history.append(record)
            records.append(record)
            bar.update(1)
            bar.set_postfix(mlm=_short(record.train_mlm_loss), nsp=_short(record.train_nsp_loss),
                            lr=f"{record.lr:.2e}", refresh=False)
            self._report(record)
            if self.config.checkpoint_interval and self.step % self.config.checkpoint_interval == 0:
                self.save_checkpoint()
        else:
            self.stop_reason = "finished"

    def _notify_end(self) -> None:
        if not self.dist.is_main:
            return
        for callback in self.callbacks:
            on_train_end = getattr(callback, "on_train_end", None)
            if callable(on_train_end):
                on_train_end(self)

    def _report(self, record: MetricsRecord) -> None:
        """Metrics file line, log line and callbacks: rank 0 only."""
        if not self.dist.is_main:
            return
        if self.config.metrics_file is not None:
            append_record(self.config.metrics_file, record)
        interval = self.config.log_interval
        if record.evaluated or (interval and record.step % interval == 0):
            logger.info("step %d: %s", record.step, ", ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items() if k != "step"))
        for callback in self.callbacks:
            callback(record)

    # background thread -----------------------------------------------------------------------------------
    @property
    def is_running(self) -> bool:
        """True while start()'s thread is training."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, steps: int | None = None) -> threading.Thread:
        """Train on a background thread (a notebook stays responsive); stop() ends it cleanly, join() waits."""
        if self.is_running:
            raise RuntimeError("this Trainer is already running; call stop() or join() first.")
        self._target_step(steps)  # argument errors surface here, not in the thread
        self.error = None
        self._stop.clear()
        self._thread = threading.Thread(target=self._run_in_background, args=(steps,), name="bertviz-lab-trainer",
                                        daemon=True)
        self._thread.start()
        return self._thread

    def _run_in_background(self, steps: int | None) -> None:
        try:
            self.fit(steps)
        except BaseException as error:  # kept for join(); a thread cannot raise into the notebook
            self.error = error
            logger.error("background training failed: %s", error)

    def stop(self, wait: bool = True, timeout: float | None = None) -> None:
        """Ask the loop to end after the current step (it then writes a checkpoint); wait for it unless wait=False."""
        self._stop.set()
        if wait:
            self.join(timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the background run; re-raise its error; True when it has ended."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return False
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return True

    # checkpoints -----------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything but the weights that a resume needs (tensors and plain values only)."""
        data = self.train_batches.state_dict() if hasattr(self.train_batches, "state_dict") else None
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "data": data,
            "rng": gather_objects(ckpt.capture_rng_state(), self.dist),  # one per rank: dropout differs per process
            "history": [record.to_dict() for record in self.history],
            "elapsed": self._elapsed_before,
            "world_size": self.dist.world_size,
            "train_config": dataclasses.asdict(self.config),
        }

    def save_checkpoint(self) -> Path:
        """Write a checkpoint for the current step (every process must call it; rank 0 writes)."""
        if self.config.checkpoint_dir is None:
            raise ValueError("TrainConfig.checkpoint_dir is not set; there is nowhere to save a checkpoint.")
        self._check_not_running("save_checkpoint()")
        state = self.state_dict()
        path = Path(self.config.checkpoint_dir) / ckpt.checkpoint_name(self.step)
        if self.dist.is_main:
            with one_writer(self.config.checkpoint_dir, "training"):  # fit holds it already; a lone save takes it
                path = ckpt.save_checkpoint(self.config.checkpoint_dir, self.step, self.model, state,
                                            keep=self.config.keep_checkpoints, tokenizer=self.tokenizer)
            logger.info("saved checkpoint %s", path)
        barrier(self.dist)
        self.last_checkpoint = path
        return path

    def load_checkpoint(self, path: str | Path, verify: bool = True) -> Path:
        """Continue from a checkpoint folder (or a checkpoint directory's latest): weights, optimizer, schedule,
        step, data position, RNG states and metrics history.

        Every file is first checked against the checkpoint's manifest (verify=False: the caller already did): a
        damaged or changed file raises checkpoint.CheckpointError (a ValueError) naming it, and nothing is loaded."""
        self._check_not_running("load_checkpoint()")
        path = ckpt.verify_checkpoint(path) if verify else ckpt.resolve_checkpoint(path)
        state = ckpt.load_trainer_state(path)
        ckpt.load_model_weights(self.model, path)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and state.get("scaler") is not None:
            self.scaler.load_state_dict(state["scaler"])
        if state.get("data") is not None and hasattr(self.train_batches, "load_state_dict"):
            self.train_batches.load_state_dict(state["data"])
        rng_states = state["rng"]
        if len(rng_states) != self.dist.world_size:
            logger.warning("checkpoint %s was written by %d processes, this run has %d: dropout randomness will "
                           "not continue exactly.", path, len(rng_states), self.dist.world_size)
        ckpt.restore_rng_state(rng_states[self.dist.rank % len(rng_states)])
        self.step = int(state["step"])
        self.history = [MetricsRecord.from_dict(record) for record in state["history"]]
        self._elapsed_before = float(state.get("elapsed", 0.0))
        self.last_checkpoint = path
        if self.config.metrics_file is not None and self.dist.is_main:
            rewrite_records(self.config.metrics_file, self.history)  # steps after the checkpoint: computed again
        return path

    def close(self) -> None:
        """Stop a background run and leave the process group this Trainer joined."""
        if self.is_running:
            self.stop()
        close_distributed(self.dist)
