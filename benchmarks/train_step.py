"""Training-step throughput: the Trainer's step against transformers' BertForPreTraining, same config, same run.

    python benchmarks/train_step.py                    # CPU rows (and the GPU row where CUDA is present)
    python benchmarks/train_step.py --device cpu       # MiniLM-sized and bert-base, batch 8, seq 128, fp32
    python benchmarks/train_step.py --device cuda      # bert-base, batch 256, seq 128, bf16 autocast
    python benchmarks/train_step.py --no-compile       # eager only
    python benchmarks/train_step.py --quick            # tiny batches, two rounds: does it run?

Ours is `Trainer.fit` itself, one step at a time: the PretrainingObjective (fused QKV model, MLM logits only at
the masked positions), loss normalisation, gradient clipping, AdamW and the LR schedule; compiled, it is a Trainer
with `TrainConfig(compile=True)`, which compiles the objective. Transformers runs the usual loop over the same
batches: `BertForPreTraining(labels=..., next_sentence_label=...)` (SDPA attention, MLM logits at every position),
backward, the same clipping, an AdamW with the same hyper-parameters and parameter groups, the same schedule;
compiled, its model goes through `torch.compile` (default mode). The optimizer stays eager in all four. Ours reads
its losses back every step (the Trainer records them); the reference loop never waits on the device mid-round.

Before timing, both models start from the same weights (ours saved with `save_pretrained`, loaded by
transformers) and take two steps with dropout off: the losses and gradient norms must agree, or the script stops.
Then the four contenders (ours and transformers, eager and compiled) run in rounds of a few steps each, in a
rotating order, until each has run `--seconds` and at least three rounds (two with --quick). A row gives the median
seq/s of each, the ratio of the medians, and `paired`: the median over rounds of the ratio within a round, which
drift between rounds cannot move. Progress and each round's times go to stderr.
Batches: `[CLS] A [SEP] B [SEP]` pairs without padding, random NSP labels, ~15% of the tokens masked 80/10/10
(labels -100 elsewhere); two different batches alternate, so the number of masked positions varies as in training
(ours compiled meets both counts during the warm-up: one recompilation with a dynamic count, then none).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import platform
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from bertviz_lab.kernels import machine
from bertviz_lab.model import BERTConfig, BERTForPreTraining
from bertviz_lab.train import TrainConfig, Trainer, create_nsp_pair_batch, synthetic_to_training_batch
from bertviz_lab.train.trainer import parameter_groups, warmup_then_linear_decay

CONFIGS = {
    "minilm": dict(num_hidden_layers=6, hidden_size=384, num_attention_heads=12, intermediate_size=1536),
    "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072),
}
# per device: batch, seq, precision, steps per timed round, default seconds per contender
FULL = {"cpu": (8, 128, "fp32", 1, 20.0), "cuda": (256, 128, "bf16", 5, 10.0)}
QUICK = {"cpu": (4, 32, "fp32", 1, 0.0), "cuda": (8, 128, "bf16", 2, 0.0)}
MAX_STEPS = 10**9  # the linear decay stays at lr × 1.0 for the whole benchmark
Batch = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Setting:
    """One device's rows: what the task statement fixes per device, shrunk by --quick."""

    device: torch.device
    batch: int
    seq: int
    precision: str  # TrainConfig.precision
    steps_per_round: int
    seconds: float
    min_rounds: int


@dataclass
class Contender:
    """One way of training: `run(steps)` trains that many steps and returns when the device is done."""

    label: str
    run: Callable[[int], None]
    seconds_per_step: dict[int, float] = field(default_factory=dict)  # by round
    error: str | None = None

    def seq_per_s(self, batch: int) -> float | None:
        """Median throughput, None when it failed or has no sample."""
        if self.error is not None or not self.seconds_per_step:
            return None
        return batch / statistics.median(self.seconds_per_step.values())


# machine -----------------------------------------------------------------------------------------------
def describe_machine(devices: list[torch.device]) -> list[str]:
    """Lines that say where the numbers come from, so a table can be compared with another run."""
    import transformers

    lines = [f"command: {shlex.join(['python', *sys.argv])}",
             f"CPU: {machine.describe()}; torch {torch.__version__}, "
             f"transformers {transformers.__version__}, Python {platform.python_version()}"]
    if any(device.type == "cuda" for device in devices):
        lines.append(f"GPU: {torch.cuda.get_device_name()}, CUDA {torch.version.cuda}")
    return lines


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so a time covers what was asked."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# models and data ---------------------------------------------------------------------------------------
def make_pair(name: str, device: torch.device) -> tuple[BERTForPreTraining, torch.nn.Module]:
    """Ours, randomly initialised, and transformers' BertForPreTraining loaded from its saved weights."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(0)
    ours = BERTForPreTraining(BERTConfig(**CONFIGS[name]))
    with tempfile.TemporaryDirectory() as folder:
        ours.save_pretrained(folder)
        reference = transformers.BertForPreTraining.from_pretrained(folder, attn_implementation="sdpa")
    return ours.to(device), reference.to(device)


def make_batches(vocab_size: int, batch: int, seq: int, count: int = 2) -> list[Batch]:
    """Sentence-pair batches in the Trainer's layout (mlm_labels -100 where not masked), on the CPU."""
    return [synthetic_to_training_batch(create_nsp_pair_batch(batch, seq, vocab_size, seed, mask_prob=0.15))
            for seed in range(count)]


# the two training loops --------------------------------------------------------------------------------
def train_config(setting: Setting, compile_step: bool) -> TrainConfig:
    """The Trainer's settings: its defaults (lr 1e-4, AdamW, clipping at 1.0), quiet, no end to the schedule."""
    return TrainConfig(max_steps=MAX_STEPS, batch_size=setting.batch, precision=setting.precision,
                       compile=compile_step, device=str(setting.device), log_interval=0, progress=False)


def ours_contender(model: BERTForPreTraining, batches: list[Batch], setting: Setting,
                   compile_step: bool) -> tuple[Contender, Trainer]:
    """`Trainer.fit` as a user calls it: the path this benchmark is about."""
    trainer = Trainer(model, list(batches), config=train_config(setting, compile_step))

    def run(steps: int) -> None:
        trainer.fit(steps)
        synchronize(setting.device)

    return Contender("ours compiled" if compile_step else "ours eager", run), trainer


class ReferenceLoop:
    """The plain loop around transformers' model, mirroring the Trainer's optimizer, clipping and schedule."""

    def __init__(self, model: torch.nn.Module, batches: list[Batch], setting: Setting, config: TrainConfig,
                 compile_step: bool) -> None:
        self.model = torch.compile(model) if compile_step else model
        self.batches, self.position, self.device = batches, 0, setting.device
        self.max_grad_norm = config.max_grad_norm if config.max_grad_norm is not None else float("inf")
        self.autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(setting.precision)
        self.optimizer = torch.optim.AdamW(parameter_groups(model, config.weight_decay), lr=config.learning_rate,
                                           betas=config.adam_betas, eps=config.adam_epsilon)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, warmup_then_linear_decay(config.warmup_steps, config.max_steps))

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One optimizer step on the next batch; (loss, gradient norm before clipping), left on the device."""
        batch = self.batches[self.position % len(self.batches)]
        self.position += 1
        inputs = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        with self._autocast():
            loss = self.model(input_ids=inputs["input_ids"], token_type_ids=inputs["token_type_ids"],
                              attention_mask=inputs["attention_mask"], labels=inputs["mlm_labels"],
                              next_sentence_label=inputs["nsp_labels"]).loss
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach(), grad_norm

    def run(self, steps: int) -> None:
        """`steps` steps, then wait for the device."""
        for _ in range(steps):
            self.step()
        synchronize(self.device)


# correctness -------------------------------------------------------------------------------------------
def check_same_computation(trainer: Trainer, reference: ReferenceLoop, setting: Setting) -> str:
    """Two steps of each from the same weights with dropout off: equal losses and gradient norms, or SystemExit.

    The second step's loss also covers the first update (AdamW on equal gradients)."""
    models = (trainer.model, reference.model)
    for model in models:
        model.eval()  # dropout off; gradients still flow, so ours stays on its training path
    tolerance = 1e-4 if setting.precision == "fp32" else 5e-2  # relative; bf16 rounds differently in each model
    pieces = []
    try:
        for step in (1, 2):
            record = trainer.fit(1)[-1]
            loss, grad_norm = (float(value) for value in reference.step())
            for what, mine, theirs in (("loss", record.train_loss, loss), ("grad norm", record.grad_norm, grad_norm)):
                if abs(mine - theirs) > tolerance * max(1.0, abs(theirs)):
                    raise SystemExit(f"step {step}: ours and transformers disagree on the {what} ({mine:.6g} vs "
                                     f"{theirs:.6g}, relative tolerance {tolerance}); the rows would compare "
                                     f"different computations.")
            pieces.append(f"step {step} loss {record.train_loss:.5f} vs {loss:.5f}, "
                          f"grad norm {record.grad_norm:.4f} vs {grad_norm:.4f}")
    finally:
        for model in models:
            model.train()
    return "; ".join(pieces)


# timing ------------------------------------------------------------------------------------------------
def first_line(error: BaseException) -> str:
    """The error's type and first line: why a contender has no number."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def attempt(contender: Contender, steps: int) -> float | None:
    """Seconds for `steps` steps, or None after recording why they failed (e.g. torch.compile has no compiler)."""
    if contender.error is not None:
        return None
    start = time.perf_counter()
    try:
        contender.run(steps)
    except Exception as error:  # a failing contender becomes its row's reason, not a crash
        contender.error = first_line(error)
        print(f"  {contender.label} failed: {error!r}"[:2000], file=sys.stderr, flush=True)
        return None
    return time.perf_counter() - start


def warm_up(contenders: list[Contender], steps: int) -> None:
    """Steps that pay for compilation (one graph per distinct masked count) and first-touch allocations."""
    for contender in contenders:
        elapsed = attempt(contender, steps)
        if elapsed is not None:
            print(f"  warm-up {contender.label}: {elapsed:.1f} s for {steps} steps", file=sys.stderr, flush=True)


def race(contenders: list[Contender], setting: Setting) -> int:
    """Alternate short timed rounds in a rotating order until each contender ran long enough; returns the rounds."""
    rounds = 0
    while True:
        active = [c for c in contenders if c.error is None]
        spent = [sum(c.seconds_per_step.values()) * setting.steps_per_round for c in active]
        if not active or (rounds >= setting.min_rounds and min(spent) >= setting.seconds):
            return rounds
        shift = rounds % len(active)
        times = []
        for contender in active[shift:] + active[:shift]:
            elapsed = attempt(contender, setting.steps_per_round)
            if elapsed is not None:
                contender.seconds_per_step[rounds] = elapsed / setting.steps_per_round
                times.append(f"{contender.label} {elapsed / setting.steps_per_round:.3f}")
        rounds += 1
        print(f"  round {rounds}, s/step: {', '.join(times)}", file=sys.stderr, flush=True)


# one row -----------------------------------------------------------------------------------------------
def build_contenders(name: str, setting: Setting, compiled: bool) -> tuple[list[Contender], str]:
    """The four contenders (two without compile) after the correctness check; returns them and the check's line."""
    ours_model, reference_model = make_pair(name, setting.device)
    batches = make_batches(ours_model.config.vocab_size, setting.batch, setting.seq)
    ours_eager, trainer = ours_contender(ours_model, batches, setting, compile_step=False)
    loop = ReferenceLoop(reference_model, batches, setting, trainer.config, compile_step=False)
    check = check_same_computation(trainer, loop, setting)
    contenders = [ours_eager, Contender("transformers eager", loop.run)]
    if compiled:  # the same two models, each with its own optimizer state
        contenders.append(ours_contender(ours_model, batches, setting, compile_step=True)[0])
        compiled_loop = ReferenceLoop(reference_model, batches, setting, trainer.config, compile_step=True)
        contenders.append(Contender("transformers compiled", compiled_loop.run))
    return contenders, check


def cell(value: float | None, error: str | None) -> str:
    """A seq/s cell, or why there is no number (in full below the table)."""
    if value is not None:
        return f"{value:,.1f}"
    if error is None:
        return "-"
    return f"failed ({error if len(error) <= 60 else error[:57] + '...'})"


def ratio(ours: float | None, reference: float | None) -> str:
    """ours / reference, or a dash when either is missing."""
    return f"{ours / reference:.2f}x" if ours is not None and reference is not None else "-"


def paired_ratio(ours: Contender, reference: Contender) -> str:
    """Median over rounds of the speed ratio within a round: what drift between rounds cannot move."""
    if ours.error is not None or reference.error is not None:
        return "-"
    both = ours.seconds_per_step.keys() & reference.seconds_per_step.keys()
    if not both:
        return "-"
    return f"{statistics.median(reference.seconds_per_step[r] / ours.seconds_per_step[r] for r in both):.2f}x"


def print_rows(name: str, setting: Setting, contenders: list[Contender], rounds: int) -> None:
    """eager vs eager, compiled vs compiled, ours eager vs transformers compiled."""
    by_label = {c.label: c for c in contenders}
    pairs = (("eager / eager", "ours eager", "transformers eager"),
             ("compiled / compiled", "ours compiled", "transformers compiled"),
             ("ours eager / HF compiled", "ours eager", "transformers compiled"))
    for comparison, ours_label, reference_label in pairs:
        ours, reference = by_label.get(ours_label), by_label.get(reference_label)
        if ours is None or reference is None:
            continue
        ours_sps, reference_sps = ours.seq_per_s(setting.batch), reference.seq_per_s(setting.batch)
        shape = f"{setting.batch:3d} x {setting.seq:3d}"
        ours_cell, reference_cell = cell(ours_sps, ours.error), cell(reference_sps, reference.error)
        print(f"| {name:6s} | {setting.device.type:4s} | {setting.precision:4s} | {shape:11s} | {comparison:24s} "
              f"| {ours_cell:>10s} | {reference_cell:>10s} | {ratio(ours_sps, reference_sps):>7s} "
              f"| {paired_ratio(ours, reference):>6s} | {rounds:6d} |",
              flush=True)


def measure(name: str, setting: Setting, compiled: bool) -> list[str]:
    """Check, warm up, race and print one configuration's rows; returns the notes to print below the table."""
    contenders, check = build_contenders(name, setting, compiled)
    where = f"{name}, {setting.device.type}, {setting.batch} x {setting.seq}"
    print(f"  {where}: {check}", file=sys.stderr, flush=True)
    warm_up(contenders, steps=2)
    rounds = race(contenders, setting)
    print_rows(name, setting, contenders, rounds)
    notes = [f"check ({where}, same weights, dropout off, ours vs transformers): {check}"]
    notes += [f"{where}: {c.label} failed: {c.error}" for c in contenders if c.error is not None]
    del contenders
    gc.collect()
    torch._dynamo.reset()
    if setting.device.type == "cuda":
        torch.cuda.empty_cache()
    return notes


# command line ------------------------------------------------------------------------------------------
def settings(device: str, quick: bool, seconds: float | None) -> list[Setting]:
    """The rows' device settings; --quick shrinks them to check that the script runs."""
    wanted = {"cpu": ["cpu"], "cuda": ["cuda"], "auto": ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])}
    result = []
    for kind in wanted[device]:
        batch, seq, precision, steps, default_seconds = (QUICK if quick else FULL)[kind]
        result.append(Setting(torch.device(kind), batch, seq, precision, steps,
                              default_seconds if seconds is None else seconds, 2 if quick else 3))
    return result


def parse_args() -> argparse.Namespace:
    """The options; --configs defaults to both models on the CPU and bert-base on the GPU."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto",
                        help="auto: the CPU rows, and the GPU row when CUDA is present")
    parser.add_argument("--configs", default=None, help=f"comma-separated, from {','.join(CONFIGS)}")
    parser.add_argument("--seconds", type=float, default=None,
                        help="timed seconds per contender and row (default 20 on the CPU, 10 on the GPU)")
    parser.add_argument("--no-compile", action="store_true", help="eager contenders only")
    parser.add_argument("--quick", action="store_true", help="tiny batches, two rounds: checks that it runs")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here (torch.cuda.is_available() is False).")
    unknown = [name for name in (args.configs or "").split(",") if name and name not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; expected names from {list(CONFIGS)}.")
    return args


def main() -> None:
    """Machine lines, the table, then the correctness checks and failures."""
    args = parse_args()
    rows = settings(args.device, args.quick, args.seconds)
    for line in describe_machine([setting.device for setting in rows]):
        print(line)
    print("| model  | dev  | prec | batch x seq | comparison               | ours seq/s |   HF seq/s | ours/HF "
          "| paired | rounds |")
    print("|--------|------|------|-------------|--------------------------|------------|------------|---------"
          "|--------|--------|", flush=True)
    notes = []
    for setting in rows:
        default = "minilm,base" if setting.device.type == "cpu" else "base"
        for name in (args.configs or default).split(","):
            notes += measure(name, setting, compiled=not args.no_compile)
    print()
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
