"""The metrics record a Trainer hands to its callbacks after every optimizer step, and the metrics file (JSON lines,
one record per step) it writes them to.

A metrics file holds one run: the record of step 1 starts it anew (a fresh run, also one restarted in a notebook,
never adds its steps to an earlier run's lines); a resumed run first rewrites it to its checkpoint's steps
(rewrite_records) and then adds its own."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from bertviz_lab.train.run_config import clip
from bertviz_lab.util.files import write_atomically
from bertviz_lab.util.paths import WriteError, write_failure

EVAL_KEYS = ("eval_mlm_loss", "eval_nsp_loss", "eval_mlm_accuracy", "eval_nsp_accuracy")


@dataclass
class MetricsRecord(Mapping):
    """One step's metrics (global over all processes); eval_* are None except on evaluation steps.

    A step whose batches hold no masked position (e.g. the seed's NSP-only synthetic batches) has nothing to score for
    MLM: train_mlm_loss and train_mlm_accuracy are None (null in JSON; not 0.0, which would read as a perfect
    prediction, nor NaN, which JSON cannot hold). Its MLM term is a sum over zero predictions, so it adds 0 to the loss
    and the gradient, and train_loss = nsp_weight * train_nsp_loss. Means over steps skip such steps.

    Reads as a dataclass (`record.train_mlm_loss`) and as a read-only mapping of its set fields
    (`record["lr"]`, `dict(record)`), so a live panel can treat it either way.
    """

    step: int
    train_loss: float  # mlm_weight * train_mlm_loss + nsp_weight * train_nsp_loss (the loss optimised)
    train_mlm_loss: float | None  # None when the step's batches held no masked position
    train_nsp_loss: float
    train_mlm_accuracy: float | None
    train_nsp_accuracy: float
    lr: float  # the learning rate this step used
    grad_norm: float  # before clipping
    time: float  # seconds of training so far (continues across resumes)
    eval_mlm_loss: float | None = None
    eval_nsp_loss: float | None = None
    eval_mlm_accuracy: float | None = None
    eval_nsp_accuracy: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Every field, None included (JSON- and checkpoint-friendly)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MetricsRecord":
        """Inverse of to_dict; unknown keys are a ValueError naming them."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown metrics keys {unknown}; a MetricsRecord has {sorted(names)}.")
        return cls(**data)

    @property
    def evaluated(self) -> bool:
        """True when this step ran an evaluation."""
        return self.eval_nsp_loss is not None

    def __getitem__(self, key: str) -> Any:
        value = getattr(self, key, None) if isinstance(key, str) else None
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return (f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _line(record: MetricsRecord) -> str:
    return json.dumps(record.to_dict()) + "\n"


def _write_failed(error: OSError, path: Path) -> WriteError:
    code, why = write_failure(error, path.parent)
    return WriteError(code, f"metrics_file {clip(str(path))} could not be written ({why}).")


def starts_run(record: MetricsRecord) -> bool:
    """True for the first step of a run, whose line replaces whatever the metrics file held."""
    return record.step == 1


def append_record(path: str | os.PathLike, record: MetricsRecord) -> None:
    """Add one step's line to the metrics file (step 1 starts the file anew; a link, pipe or device such as
    /dev/stdout is only ever appended to); a failed write (a full disk) is a WriteError naming the file."""
    path = Path(path)
    # /dev/stdout is a link to whatever the shell redirected it to: never truncated
    fresh = starts_run(record) and not path.is_symlink() and (not path.exists() or path.is_file())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w" if fresh else "a", encoding="utf-8") as handle:
            handle.write(_line(record))
    except OSError as error:
        raise _write_failed(error, path) from error


def rewrite_records(path: str | os.PathLike, records: Iterable[MetricsRecord]) -> None:
    """Make the metrics file hold exactly `records`, each step once (a resume: the checkpoint's steps; lines written
    after that checkpoint were lost with the run that wrote them and are computed again).

    The file is replaced in one step. A pipe or device (`/dev/stdout`) cannot be rewritten and is left alone."""
    path = Path(path)
    if path.exists() and not path.is_file():
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, "".join(_line(record) for record in records), sync=True)
    except OSError as error:
        raise _write_failed(error, path) from error
