"""Training checkpoints, written atomically, loadable without unpickling arbitrary objects.

A checkpoint is a folder `step-00000123/` holding
  config.json, model.safetensors   the model, in Hugging Face names (BERTForPreTraining.from_pretrained reads it)
  vocab.txt, tokenizer.json, ...   the tokenizer, when the Trainer was given one
  trainer_state.pt                 optimizer, scheduler, step, RNG states, data position, metrics history:
                                   tensors and plain Python values only, so torch.load(weights_only=True) reads it
  manifest.json                    the size and sha256 of each file above, written last
The folder is filled under a temporary name and renamed into place, then the `latest` file is replaced
(temporary file + os.replace): a crash leaves the previous checkpoint and pointer untouched, never a half-written
folder under a final name. A write that fails (a full disk) removes the temporary folder and raises a
CheckpointWriteError, one line naming the folder and why ("no space left on device"). A resume first checks every
file against the manifest, so a damaged or changed file stops it with a CheckpointError naming that file; a
checkpoint without a manifest (written by an older version) loads with a warning, and whatever cannot be read in it
is still a one-line CheckpointError naming the file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from bertviz_lab.model.bert import BERTPreTrainedModel
from bertviz_lab.model.families import family_of
from bertviz_lab.model.weights import (
    LATEST_POINTER,
    SAFETENSORS_NAME,
    from_hf_state_dict,
    load_into,
    read_state_dict,
    save_pretrained,
)
from bertviz_lab.train.run_config import clip
from bertviz_lab.util.files import write_atomically
from bertviz_lab.util.paths import TEMP_PREFIX, WriteError, fsync_path, write_failure

logger = logging.getLogger("bertviz_lab.train")

STATE_FILE = "trainer_state.pt"
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1
LATEST_FILE = LATEST_POINTER  # loading the checkpoint_dir as a model (bertviz_lab.load) reads it too
CHECKPOINT_PREFIX = "step-"
FORMAT_VERSION = 1
_STEP_DIR = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")
_MESSAGE_LIMIT = 400  # characters of a library's error quoted in a CheckpointError


class CheckpointError(ValueError):
    """A checkpoint file that is missing, damaged or changed since it was saved; the message names the file."""


def _one_line(error: BaseException) -> str:
    """A library's (possibly multi-line) error message as one short line."""
    return clip(" ".join(str(error).split()), _MESSAGE_LIMIT)


def checkpoint_name(step: int) -> str:
    """Folder name of the checkpoint after `step` optimizer steps."""
    return f"{CHECKPOINT_PREFIX}{step:08d}"


class CheckpointWriteError(WriteError):
    """A checkpoint could not be written (e.g. the disk is full); nothing was saved for its step."""


def _write_failed(error: BaseException, root: Path, step: int, previous: Path | None) -> CheckpointWriteError:
    code, why = write_failure(error, root)
    kept = (f"the last checkpoint {previous} is intact" if previous is not None
            else "there is no earlier checkpoint in it")
    return CheckpointWriteError(code, f"the checkpoint of step {step} could not be written in {clip(str(root))} "
                                      f"({why}); nothing was saved for step {step}, and {kept}.")


def save_checkpoint(root: str | os.PathLike, step: int, model: BERTPreTrainedModel, state: dict[str, Any],
                    keep: int | None = None, tokenizer: Any = None) -> Path:
    """Write model (+ tokenizer) and trainer state for `step` atomically, point `latest` at it, prune to `keep`."""
    root = Path(root)
    final = root / checkpoint_name(step)
    if (final / STATE_FILE).is_file():
        return final  # this step is already saved (e.g. a periodic save right before stop())
    previous = latest_checkpoint(root)
    tmp = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        for stale in root.glob(f"{TEMP_PREFIX}{CHECKPOINT_PREFIX}*"):
            shutil.rmtree(stale, ignore_errors=True)  # left by a run that died while saving
        tmp = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{final.name}-", dir=root))
        save_pretrained(model, tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        torch.save({**state, "format": FORMAT_VERSION, "step": step}, tmp / STATE_FILE)
        write_manifest(tmp)
        for file in tmp.iterdir():
            fsync_path(file)
        os.replace(tmp, final)
    except BaseException as error:  # a second Ctrl-C too: nothing half-written stays behind
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(error, Exception):
            raise _write_failed(error, root, step, previous) from error
        raise
    fsync_path(root)
    try:
        write_atomically(root / LATEST_FILE, final.name + "\n", sync=True)
    except OSError as error:
        code, why = write_failure(error, root)
        raise CheckpointWriteError(code, f"the checkpoint {final} was written, but {root / LATEST_FILE} could not be "
                                         f"updated to name it ({why}); it still names the one before.") from error
    if keep is not None:
        for old in list_checkpoints(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


# manifests -------------------------------------------------------------------------------------------
def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path) -> None:
    """manifest.json in `folder`: the size and sha256 of every file there, so a resume can tell a damaged one."""
    files = {file.name: {"size": file.stat().st_size, "sha256": file_sha256(file)}
             for file in sorted(folder.iterdir()) if file.is_file() and file.name != MANIFEST_FILE}
    text = json.dumps({"format": MANIFEST_FORMAT, "files": files}, indent=1) + "\n"
    (folder / MANIFEST_FILE).write_text(text, encoding="utf-8")


def read_manifest(folder: Path) -> dict[str, dict[str, Any]] | None:
    """The manifest's {file name: {size, sha256}}; None when the checkpoint has none (an older version wrote it)."""
    file = folder / MANIFEST_FILE
    if not file.exists():
        return None
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
        files = manifest["files"]
        if manifest.get("format") != MANIFEST_FORMAT or not all(
                isinstance(name, str) and Path(name).name == name and isinstance(entry.get("size"), int)
                and isinstance(entry.get("sha256"), str) for name, entry in files.items()):
            raise ValueError("unexpected layout")
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise CheckpointError(f"{file} is damaged ({_one_line(error)}); the checkpoint cannot be verified.") from None
    return files


def _mismatch(file: Path, expected: dict[str, Any]) -> str | None:
    """How `file` differs from its manifest entry (missing, size, sha256), or None when it matches."""
    changed = "the file was damaged or changed after it was saved"
    if not file.is_file():
        return "is missing, though the checkpoint's manifest lists it"
    size = file.stat().st_size
    if size != expected["size"]:
        return f"does not match the checkpoint's manifest ({size} bytes, {expected['size']} were saved): {changed}"
    if file_sha256(file) != expected["sha256"]:
        return f"does not match the checkpoint's manifest (sha256 differs): {changed}"
    return None


def verify_checkpoint(path: str | os.PathLike) -> Path:
    """The checkpoint folder, every file checked against its manifest; CheckpointError names the first that is not
    as it was saved. A checkpoint without a manifest (an older version's) is loaded unverified, with a warning."""
    folder = resolve_checkpoint(path)
    files = read_manifest(folder)
    if files is None:
        logger.warning("checkpoint %s has no %s (written by an older version): its files cannot be verified.",
                       folder, MANIFEST_FILE)
        return folder
    for name in (SAFETENSORS_NAME, STATE_FILE):
        if name not in files:
            raise CheckpointError(f"{folder / MANIFEST_FILE} does not list {name}; the checkpoint is incomplete.")
    for name, expected in files.items():
        problem = _mismatch(folder / name, expected)
        if problem is not None:
            raise CheckpointError(f"{folder / name} {problem}.")
    return folder


def list_checkpoints(root: str | os.PathLike) -> list[Path]:
    """Complete checkpoint folders under `root`, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = _STEP_DIR.match(path.name)
        if match and (path / STATE_FILE).is_file() and (path / SAFETENSORS_NAME).is_file():
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def latest_checkpoint(root: str | os.PathLike) -> Path | None:
    """The checkpoint `latest` names (else the newest complete one); None when there is none."""
    root = Path(root)
    pointer = root / LATEST_FILE
    if pointer.is_file():
        candidate = root / pointer.read_text(encoding="utf-8").strip()
        if (candidate / STATE_FILE).is_file():
            return candidate
    checkpoints = list_checkpoints(root)
    return checkpoints[-1] if checkpoints else None


def holds_no_checkpoint(root: str | os.PathLike) -> bool:
    """True when `root` is missing, or a folder with no checkpoint, half-written one or `latest` pointer in it."""
    root = Path(root)
    if not root.exists():
        return True
    return root.is_dir() and not any(_STEP_DIR.match(p.name) or p.name == LATEST_FILE for p in root.iterdir())


def _is_checkpoint_folder(path: Path) -> bool:
    """A step-N folder or one with a manifest: a checkpoint itself, not a directory of checkpoints."""
    return path.is_dir() and (_STEP_DIR.match(path.name) is not None or (path / MANIFEST_FILE).is_file())


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """A checkpoint folder itself, or a checkpoint directory (its latest checkpoint); a clear error otherwise."""
    path = Path(path)
    if (path / STATE_FILE).is_file():
        return path
    pointer = path / LATEST_FILE
    named = path / pointer.read_text(encoding="utf-8").strip() if pointer.is_file() else path
    if _is_checkpoint_folder(named) and not (named / STATE_FILE).is_file():  # asked for, or named by `latest`
        raise CheckpointError(f"{named / STATE_FILE} is missing: the checkpoint is incomplete.")
    if path.is_dir():
        latest = latest_checkpoint(path)
        if latest is not None:
            return latest
        raise FileNotFoundError(f"no checkpoint in {str(path)!r}: expected a {CHECKPOINT_PREFIX}N folder with "
                                f"{STATE_FILE}, or a directory holding such folders.")
    raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist.")


def load_trainer_state(path: str | os.PathLike) -> dict[str, Any]:
    """The trainer state of a checkpoint, read with torch.load(weights_only=True) (no arbitrary objects)."""
    file = resolve_checkpoint(path) / STATE_FILE
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises several types for truncated or unsafe files
        raise CheckpointError(f"{file} could not be loaded (damaged, or not written by bertviz_lab): "
                              f"{_one_line(error)}") from error
    if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"{file} is not a bertviz_lab trainer state of format {FORMAT_VERSION}.")
    return state


def load_model_weights(model: BERTPreTrainedModel, path: str | os.PathLike) -> None:
    """Copy a checkpoint's weights into `model` (every tensor must match: strict); CheckpointError names the file."""
    file = resolve_checkpoint(path) / SAFETENSORS_NAME
    if not file.is_file():
        raise CheckpointError(f"{file} is missing: the checkpoint is incomplete.")
    try:
        load_into(model, from_hf_state_dict(read_state_dict(file.parent), family_of(model.config)), strict=True)
    except (ValueError, OSError) as error:
        message = _one_line(error)
        raise CheckpointError(message if str(file) in message else f"{file} could not be loaded: {message}") from error


# random number generators ----------------------------------------------------------------------------
def capture_rng_state() -> dict[str, Any]:
    """Python, torch CPU, CUDA (when in use) and NumPy (when imported) generator states, as tensors and plain values."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        name, keys, pos, has_gauss, cached = numpy.random.get_state()
        state["numpy"] = {"name": name, "keys": torch.from_numpy(keys.astype("int64")), "pos": int(pos),
                          "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Put back what capture_rng_state recorded."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy

        saved = state["numpy"]
        numpy.random.set_state((saved["name"], saved["keys"].numpy().astype("uint32"), saved["pos"],
                                saved["has_gauss"], saved["cached_gaussian"]))
