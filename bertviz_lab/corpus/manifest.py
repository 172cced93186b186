"""A corpus folder read as untrusted input: folders are made to be shared, so nothing in one is believed before it is
checked. The manifest must fit its schema (types, ranges, shard names of one fixed pattern, counts that add up)
before anything else reads it; every file read must be a regular file inside the folder (no symlink, nothing
outside); and each shard's files must agree with the manifest (Parquet row counts from their footers, the shapes,
dtypes and lengths of the vector files from their headers), so a truncated, swapped or edited file is one line
naming it, never a silently wrong answer. Opening a folder reads only these small parts: no table and no vector is
loaded."""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np

from bertviz_lab.corpus import folder, neurons, vectors
from bertviz_lab.util.files import first_line, named, shown

MAX_MANIFEST_BYTES = 64 << 20  # ~1,000 times the manifest of a million texts in shards of 1,024
MAX_LAYERS = 1024
MAX_HEADS = 4096
MAX_LENGTH = 1 << 20
MAX_NAME = 1000  # characters of model_name
HASH = re.compile(r"[0-9a-f]{16}")
TABLES = ("texts", "tokens", "text_stats")
DAMAGED = folder.DAMAGED
LINK = "is a symbolic link; a corpus folder holds its own files, so it is not read."


class ManifestError(ValueError):
    """A corpus folder whose manifest or files do not hold what a complete corpus holds; one line naming the file
    or field."""


def read_manifest(out: Path) -> dict[str, Any]:
    """The checked manifest of a complete corpus folder: a ManifestError (a ValueError) naming the folder, the file
    or the field otherwise."""
    out = Path(out)
    if not out.is_dir():
        raise ManifestError(f"{named(out)} is not a corpus folder: it does not exist." if not out.exists()
                            else f"{named(out)} is not a corpus folder: it is a file.")
    path = out / folder.MANIFEST
    if not os.path.lexists(path):
        why = ("its analysis did not finish (no manifest.json yet); run analyze again to resume it"
               if (out / folder.SETTINGS).is_file() else "it has no manifest.json")
        raise ManifestError(f"{named(out)} is not a complete corpus: {why}.")
    size = regular_file(out, path).st_size
    if size > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{named(path)}: {size:,} bytes, more than a manifest holds ({MAX_MANIFEST_BYTES:,}); "
                            f"{DAMAGED}.")
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ManifestError(f"{named(path)} is not JSON ({first_line(error)}); {DAMAGED}.") from None
    if not isinstance(manifest, dict):
        raise ManifestError(f"{named(path)} holds a {type(manifest).__name__}, not a manifest object; {DAMAGED}.")
    if manifest.get("complete") is not True or manifest.get("format") != folder.FORMAT:
        raise ManifestError(f"{named(out)} is not a complete corpus: its manifest.json is not marked complete "
                            f"(format {folder.FORMAT}).")
    check_schema(manifest, path)
    check_files(out, manifest)
    return manifest


def regular_file(out: Path, path: Path) -> os.stat_result:
    """The stat of `path`, a regular file inside `out`: neither it nor a folder on the way from `out` is a link, and
    no part of its name climbs out (so it cannot lead elsewhere, without resolving it: a corpus has many files)."""
    relative = path.relative_to(out)  # the callers build every path from out and checked names
    current = out
    for part in relative.parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise ManifestError(f"{named(current)} {LINK}")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise ManifestError(f"{named(path)} is missing; {DAMAGED}.") from None
    if stat.S_ISLNK(info.st_mode):
        raise ManifestError(f"{named(path)} {LINK}")
    if not stat.S_ISREG(info.st_mode):
        raise ManifestError(f"{named(path)} is not a regular file; {DAMAGED}.")
    if ".." in relative.parts or relative.is_absolute():  # never from checked names; kept for any other caller
        raise ManifestError(f"{named(path)} leads outside the corpus folder {named(out)}; it is not read.")
    return info


# the schema ---------------------------------------------------------------------------------------------------
def field(manifest: dict[str, Any], name: str, path: Path) -> Any:
    if name not in manifest:
        raise ManifestError(f"{named(path)}: field {name!r} is missing; {DAMAGED}.")
    return manifest[name]


def integer(value: Any, name: str, path: Path, low: int, high: float = math.inf) -> int:
    if type(value) is not int or not low <= value <= high:
        bound = f"{low} or more" if high == math.inf else f"{low}-{high}"
        raise ManifestError(f"{named(path)}: field {name!r} is {shown(value)}, not an integer {bound}; {DAMAGED}.")
    return value


def integers(value: Any, name: str, path: Path, low: int, high: int) -> list[int]:
    if not isinstance(value, list):
        raise ManifestError(f"{named(path)}: field {name!r} is {shown(value)}, not a list; {DAMAGED}.")
    items = [integer(item, f"{name}[{i}]", path, low, high) for i, item in enumerate(value)]
    if len(set(items)) != len(items):
        raise ManifestError(f"{named(path)}: field {name!r} repeats a value; {DAMAGED}.")
    return items


def check_schema(manifest: dict[str, Any], path: Path) -> None:
    """Every field a reader uses, with its type and range, and the counts that must agree."""
    digest = field(manifest, "hash", path)
    if not isinstance(digest, str) or not HASH.fullmatch(digest):
        raise ManifestError(f"{named(path)}: field 'hash' is {shown(digest)}, not 16 hex digits; {DAMAGED}.")
    name = field(manifest, "model_name", path)
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not name.isprintable():
        raise ManifestError(f"{named(path)}: field 'model_name' is {shown(name)}, not a printable name of 1-{MAX_NAME} "
                            f"characters; {DAMAGED}.")
    num_heads = integer(field(manifest, "num_heads", path), "num_heads", path, 1, MAX_HEADS)
    layers = integers(field(manifest, "layers", path), "layers", path, 0, MAX_LAYERS - 1)
    if not layers:
        raise ManifestError(f"{named(path)}: field 'layers' is empty; {DAMAGED}.")
    heads = integers(field(manifest, "heads", path), "heads", path, 0, num_heads - 1)
    if not heads:
        raise ManifestError(f"{named(path)}: field 'heads' is empty; {DAMAGED}.")
    kinds = field(manifest, "vectors", path)
    if (not isinstance(kinds, list) or any(kind not in vectors.VECTOR_KINDS for kind in kinds)
            or len(set(kinds)) < len(kinds)):
        raise ManifestError(f"{named(path)}: field 'vectors' is {shown(kinds)}, not a list of "
                            f"{', '.join(vectors.VECTOR_KINDS)}; {DAMAGED}.")
    vector_layers = integers(field(manifest, "vector_layers", path), "vector_layers", path, 0, MAX_LAYERS - 1)
    if vector_layers != (layers if "hidden" in kinds else []):
        raise ManifestError(f"{named(path)}: field 'vector_layers' is {shown(vector_layers)}, not the analysed layers "
                            f"where hidden vectors are stored (and [] where not); {DAMAGED}.")
    pairs = field(manifest, "qk_heads", path)
    if (not isinstance(pairs, list)
            or any(not isinstance(p, list) or len(p) != 2 or p[0] not in layers or type(p[0]) is not int
                   or type(p[1]) is not int or not 0 <= p[1] < num_heads for p in pairs)
            or len({tuple(p) for p in pairs}) < len(pairs) or bool(pairs) != ("qk" in kinds)):
        raise ManifestError(f"{named(path)}: field 'qk_heads' is {shown(pairs)}, not distinct [layer, head] pairs "
                            f"of the analysed layers (and [] where no queries and keys are stored); {DAMAGED}.")
    segment_rows = manifest.get("index_segment_rows")  # absent in folders from before indexes came in segments
    if segment_rows is not None:
        integer(segment_rows, "index_segment_rows", path, 1)
        if not vector_layers:
            raise ManifestError(f"{named(path)}: field 'index_segment_rows' is {segment_rows}, but the folder stores "
                                f"no hidden vectors to index; {DAMAGED}.")
    precision = manifest.get("precision", "fp32")  # absent in folders from before bf16 runs
    if precision not in ("fp32", "bf16"):
        raise ManifestError(f"{named(path)}: field 'precision' is {shown(precision)}, not 'fp32' or 'bf16'; "
                            f"{DAMAGED}.")
    if "neurons" in manifest or "intermediate_size" in manifest:  # both absent where no neuron maxima are kept
        integer(field(manifest, "neurons", path), "neurons", path, 1, neurons.MAX_K)
        integer(field(manifest, "intermediate_size", path), "intermediate_size", path, 1, MAX_LENGTH)
    num_texts = integer(field(manifest, "num_texts", path), "num_texts", path, 0)
    integer(field(manifest, "max_length", path), "max_length", path, 2, MAX_LENGTH)
    shards = field(manifest, "shards", path)
    if not isinstance(shards, list):
        raise ManifestError(f"{named(path)}: field 'shards' is {shown(shards)}, not a list; {DAMAGED}.")
    for index, entry in enumerate(shards):
        where = f"shards[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"name", "texts", "tokens"}:
            raise ManifestError(f"{named(path)}: field {where!r} is {shown(entry)}, not an object of name, texts and "
                                f"tokens; {DAMAGED}.")
        if not isinstance(entry["name"], str) or entry["name"] != folder.shard_name(index):
            raise ManifestError(f"{named(path)}: field '{where}.name' is {shown(entry['name'])}, not "
                                f"{folder.shard_name(index)!r} (shards are named 00000, 00001, ... in order); "
                                f"{DAMAGED}.")
        texts = integer(entry["texts"], f"{where}.texts", path, 1)
        integer(entry["tokens"], f"{where}.tokens", path, texts)
    total = sum(entry["texts"] for entry in shards)
    if total != num_texts:
        raise ManifestError(f"{named(path)}: its shards hold {total} texts, field 'num_texts' says {num_texts}; "
                            f"{DAMAGED}.")


# the files ----------------------------------------------------------------------------------------------------
def check_files(out: Path, manifest: dict[str, Any]) -> None:
    """Each file a reader opens exists as a regular file inside `out` and agrees with the manifest."""
    layers, heads = manifest["layers"], manifest["heads"]
    check_parquet(out, out / folder.HEAD_STATS, len(layers) * len(heads))
    shards = out / folder.SHARDS
    if shards.is_symlink() or not shards.is_dir():
        raise ManifestError(f"{named(shards)} is {'a symbolic link' if shards.is_symlink() else 'missing'}; {DAMAGED}.")
    for entry in manifest["shards"]:
        shard = shards / entry["name"]
        if shard.is_symlink():
            raise ManifestError(f"{named(shard)} {LINK}")
        if not shard.is_dir():
            raise ManifestError(f"{named(out)} is not a complete corpus: shard {entry['name']} listed in "
                                "manifest.json is missing.")
        texts, tokens = entry["texts"], entry["tokens"]
        expected = {"texts": texts, "tokens": tokens, "text_stats": texts * len(layers) * len(heads)}
        for table in TABLES:
            check_parquet(out, shard / f"{table}.parquet", expected[table])
        for layer in manifest["vector_layers"]:
            check_vectors(out, shard / vectors.hidden_file(layer), tokens)
        for layer, head in manifest["qk_heads"]:
            for name in vectors.qk_files(layer, head):
                check_vectors(out, shard / name, tokens)
    if manifest.get("neurons"):
        check_neuron_table(out, manifest)
    segment_rows = manifest.get("index_segment_rows")
    if segment_rows:
        rows = sum(entry["tokens"] for entry in manifest["shards"])
        for layer in manifest["vector_layers"]:
            for name in vectors.index_files(layer, rows, segment_rows):
                regular_file(out, out / folder.INDEX / name)  # its graph is checked when a search first opens it


NEURON_SCHEMA = {"layer": "int16", "neuron": "int32", "text_id": "int64", "position": "int32", "activation": "float"}


def check_neuron_table(out: Path, manifest: dict[str, Any]) -> None:
    """The neuron maxima: kept texts x neurons x layers rows of the columns neurons.COLUMNS, of their types."""
    import pyarrow.parquet as pq

    path = out / neurons.TABLE
    check_parquet(out, path, len(manifest["layers"]) * manifest["intermediate_size"] * neurons.kept(manifest))
    schema = pq.read_schema(path)
    found = {name: str(schema.field(name).type) for name in schema.names}
    if found != NEURON_SCHEMA:
        raise ManifestError(f"{named(path)} holds the columns {shown(found)}, not {NEURON_SCHEMA}; {DAMAGED}.")


def check_parquet(out: Path, path: Path, rows: int) -> None:
    """A Parquet file of `rows` rows, from its footer alone."""
    import pyarrow.parquet as pq

    regular_file(out, path)
    try:
        found = pq.read_metadata(path).num_rows
    except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a file that is no Parquet
        raise ManifestError(f"{named(path)} is not a readable Parquet file ({first_line(error)}); {DAMAGED}.") from None
    if found != rows:
        raise ManifestError(f"{named(path)} holds {found} rows where the manifest says {rows}; {DAMAGED}.")


def check_vectors(out: Path, path: Path, rows: int) -> None:
    """A float16 .npy of `rows` rows, whole: its header read, its length checked, its data not loaded."""
    size = regular_file(out, path).st_size
    try:
        with open(path, "rb") as file:
            version = np.lib.format.read_magic(file)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran_order, dtype = read_header(file)
            start = file.tell()
    except (ValueError, OSError, SyntaxError) as error:
        raise ManifestError(f"{named(path)} is not a .npy file ({first_line(error)}); {DAMAGED}.") from None
    if dtype != np.float16 or fortran_order or len(shape) != 2:
        raise ManifestError(f"{named(path)} holds {dtype} {'x'.join(map(str, shape))} values, not rows of float16 "
                            f"vectors; {DAMAGED}.")
    if shape[0] != rows:
        raise ManifestError(f"{named(path)} holds {shape[0]} vectors where the manifest says {rows} tokens; {DAMAGED}.")
    whole = start + shape[0] * shape[1] * dtype.itemsize
    if size != whole:
        raise ManifestError(f"{named(path)} is {size:,} bytes where its {shape[0]} x {shape[1]} vectors take "
                            f"{whole:,}; {DAMAGED}.")


def data_files(out: Path, manifest: dict[str, Any]) -> list[str]:
    """Every file the tables read: what the DuckDB connection over the folder may open, and nothing else."""
    shards = [out / folder.SHARDS / entry["name"] for entry in manifest["shards"]]
    extra = [str(out / neurons.TABLE)] if manifest.get("neurons") else []
    tables = [str(shard / f"{table}.parquet") for shard in shards for table in TABLES]
    return [str(out / folder.HEAD_STATS)] + extra + tables
