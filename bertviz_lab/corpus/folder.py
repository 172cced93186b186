"""The corpus folder: settings written first, one directory per shard made visible by an atomic rename, the
manifest (`complete: true`) written last. A folder a killed process left behind is never read as complete: half
written shards are temporary directories that the next run removes and recomputes.

    out/settings.json            what the corpus was analysed with (and its hash): a rerun must match it
    out/shards/00000/            texts, tokens, text_stats (.parquet); hidden-L{l}.npy, q-L{l}-H{h}.npy, k-...npy
    out/head_stats.parquet       the token-weighted means over the whole corpus
    out/neuron_maxima.parquet    with neurons=k: each feed-forward neuron's top k texts (shards/*/neurons.parquet:
                                 each shard's own, merged into it at the end; bertviz_lab.corpus.neurons)
    out/index/hidden-L{l}-{j}.usearch  segment j of the HNSW index of layer l's hidden states (only above
                                 vectors.EXACT_UP_TO of them; manifest's index_segment_rows vectors a segment)
    out/manifest.json            written last: complete, shard list, layers, heads, vectors, model name
    out/.writer.lock, .writer.json  held by the one run that writes the folder, and who that is (`writing`)

A folder is written by one run at a time: `writing(out)` takes its lock for the whole run (the processes of one
torchrun share it through rank 0), so a second run into the same folder stops at once, naming the first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

from bertviz_lab.util.files import WRITER_LOCK, WRITER_NOTE, named, one_writer, write_atomically

FORMAT = 1
SETTINGS = "settings.json"
MANIFEST = "manifest.json"
SHARDS = "shards"
INDEX = "index"
HEAD_STATS = "head_stats.parquet"
DAMAGED = "the folder is damaged: rerun analyze"  # how a file that disagrees with the manifest is reported


def settings_hash(settings: dict[str, Any]) -> str:
    """A stable digest of the settings (sorted JSON)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def write_json(path: Path, value: dict[str, Any]) -> None:
    """Write JSON through a temporary file and an atomic rename: readers see the old file or the new, never half."""
    write_atomically(path, json.dumps(value, indent=1, sort_keys=True) + "\n")


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, or None where it is missing or unreadable."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def shard_name(index: int) -> str:
    return f"{index:05d}"


def shard_dir(out: Path, index: int) -> Path:
    return out / SHARDS / shard_name(index)


def shard_done(out: Path, index: int) -> bool:
    """A shard is done once its directory exists under its final name (renamed into place as a whole)."""
    return shard_dir(out, index).is_dir()


def temporary_shard_dir(out: Path, index: int) -> Path:
    """Where a shard is written before its rename; a leftover from a killed run is removed first."""
    temporary = out / SHARDS / f".{shard_name(index)}.tmp"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    return temporary


def publish(temporary: Path, final: Path) -> None:
    """Make a fully written directory or file visible under its final name in one rename."""
    if final.is_dir():
        shutil.rmtree(final)
    os.replace(temporary, final)


@contextlib.contextmanager
def writing(out: Path) -> Iterator[None]:
    """Create `out` where it is missing and hold its writer lock while the block writes it: a ValueError of one line
    where another run holds it, where `out` is a file or a folder of other things (nothing is created in it then),
    or where it cannot be written."""
    out = Path(out)
    refuse_foreign(out)  # before the lock, so no lock file is left in someone else's folder
    created = not out.exists()
    try:
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(one_writer(out, "analyze"))
            except OSError as error:
                raise ValueError(f"out={named(out)} cannot be written: {error.strerror or error}.") from None
            yield
    finally:
        if created and out.is_dir() and not holds_other_files(out):  # a run that wrote nothing leaves nothing
            for name in (WRITER_NOTE, WRITER_LOCK):
                (out / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                out.rmdir()


def refuse_foreign(out: Path) -> None:
    """A ValueError where `out` is a file, or a folder of other things than a corpus (and its writer's lock)."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"out={named(out)} is a file, not a folder for a corpus.")
    if read_json(out / SETTINGS) is None and holds_other_files(out):
        raise ValueError(f"out={named(out)} is a folder that holds other files and no corpus; choose an empty or new "
                         "folder.")


def holds_other_files(out: Path) -> bool:
    """Whether `out` is a folder holding anything but the writer's lock and note."""
    return out.is_dir() and any(entry.name not in (WRITER_LOCK, WRITER_NOTE) for entry in out.iterdir())


def prepare(out: Path, settings: dict[str, Any]) -> bool:
    """Check `out` can hold a corpus of these settings and record them; True when it holds that corpus complete
    already. A folder holding something else, or a corpus of other settings, is an error naming the difference."""
    out = Path(out)
    refuse_foreign(out)  # again, under the lock: the answer that counts
    recorded = read_json(out / SETTINGS)
    if recorded is None:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / SETTINGS, {"hash": settings_hash(settings), "settings": settings})
        return False
    if recorded.get("hash") != settings_hash(settings):
        old = recorded.get("settings") or {}
        changed = [key for key in sorted(set(old) | set(settings)) if old.get(key) != settings.get(key)]
        raise ValueError(f"out={out} holds a corpus analysed with other settings ({', '.join(changed) or 'format'} "
                         "differ); use another folder or delete this one.")
    manifest = read_json(out / MANIFEST)
    return bool(manifest and manifest.get("complete") and manifest.get("hash") == recorded["hash"])
