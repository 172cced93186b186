"""Token vectors: the raw arrays per shard (float16 .npy), searched exactly by cosine similarity, and for a layer too
big for that usearch HNSW indexes searched approximately.

Up to EXACT_UP_TO vectors a layer is searched by brute force over its arrays (a matrix-vector product in float64:
~0.3 s at 200,000 vectors on two cores), exact and faster than building a graph would be; above, analyze builds
usearch indexes (one small maintained wheel, no OpenMP runtime of its own to clash with PyTorch's) and `nearest()`
walks their graphs unless asked for an exact answer. A layer's index is cut into segments of SEGMENT_ROWS vectors,
each built, saved and freed before the next, so building one costs the same memory at a million texts as at a
hundred thousand; a search asks every segment (memory-mapped) and merges their answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import numpy.typing as npt
import torch

from bertviz_lab.corpus.folder import DAMAGED
from bertviz_lab.util.files import first_line, named

VECTOR_KINDS = ("hidden", "qk")  # what a corpus may store: hidden states, queries and keys
EXACT_UP_TO = 200_000  # vectors of a layer searched by brute force, with no HNSW graph built
SEGMENT_ROWS = 1 << 18  # vectors per index segment: ~250 MB to build at 384 dimensions
CHUNK_ROWS = 32_768  # vectors read or scored at a time (~100 MB as float64 at 384 dimensions)


def hidden_file(layer: int) -> str:
    return f"hidden-L{layer}.npy"


def qk_files(layer: int, head: int) -> tuple[str, str]:
    return f"q-L{layer}-H{head}.npy", f"k-L{layer}-H{head}.npy"


def index_files(layer: int, rows: int, segment_rows: int) -> list[str]:
    """The names of the index segments of a layer of `rows` vectors, `segment_rows` to a segment, in row order."""
    return [f"hidden-L{layer}-{j:05d}.usearch" for j in range(len(segment_sizes(rows, segment_rows)))]


def segment_sizes(rows: int, segment_rows: int) -> list[int]:
    """How many vectors each segment of a layer of `rows` holds."""
    return [min(segment_rows, rows - first) for first in range(0, rows, segment_rows)]


def stacked(shard_dirs: list[Path], name: str) -> npt.NDArray[np.float32]:
    """One (rows, dim) float32 array of a vector file over the shards, in shard order."""
    parts = list(one_by_one(shard_dirs, name))
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 0), np.float32)


def gathered(shard_dirs: list[Path], name: str, rows: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.float32]:
    """(len(rows), dim) float32: the given rows (sorted row numbers over the whole layer) of the vector file `name`,
    read from the memory-mapped shards, so a sample of a large corpus costs the sample's memory only."""
    arrays = list(one_by_one(shard_dirs, name))
    ends = np.cumsum([len(array) for array in arrays])
    shard_of = np.searchsorted(ends, rows, side="right")
    parts = [arrays[s][rows[shard_of == s] - (ends[s] - len(arrays[s]))] for s in np.unique(shard_of)]
    dim = arrays[0].shape[1] if arrays else 0
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, dim), np.float32)


def chunks(arrays: Iterable[npt.NDArray[Any]], size: int) -> Iterator[npt.NDArray[Any]]:
    """The rows of `arrays` in order, `size` or fewer at a time (a chunk never spans two arrays); rows of a
    memory-mapped array are read only as their chunk comes."""
    for array in arrays:
        for first in range(0, len(array), size):
            yield np.asarray(array[first:first + size])


def one_by_one(shard_dirs: list[Path], name: str) -> Iterator[npt.NDArray[Any]]:
    """The vector file `name` of each shard in turn, memory-mapped and let go before the next: pages read through a
    mapping count as the process' memory until it is unmapped, and a layer can be many gigabytes."""
    for folder in shard_dirs:
        yield np.load(folder / name, mmap_mode="r")


def build_index(shard_dirs: list[Path], name: str, paths: list[Path], segment_rows: int,
                threads: int | None = None) -> None:
    """Write cosine usearch indexes over the vector file `name` of every shard, the first `segment_rows` vectors to
    `paths[0]`, the next to `paths[1]`, ... (keys = row numbers over the whole layer, in shard order), each through a
    temporary file. The float16 vectors stream from the memory-mapped shards into a float16 index (what is stored,
    no rounding beyond it) on `threads` threads (default: torch's); only one segment is ever in memory."""
    from usearch.index import Index

    rows = sum(len(array) for array in one_by_one(shard_dirs, name))
    if rows == 0:
        raise ValueError(f"no shard holds {name}: there is nothing to index.")
    segments = len(segment_sizes(rows, segment_rows))
    if segments != len(paths):
        raise ValueError(f"{name} holds {rows} vectors: {segments} index segments of {segment_rows}, not the "
                         f"{len(paths)} asked for.")
    threads = threads or torch.get_num_threads()
    index, row, segment = None, 0, 0
    for chunk in chunks(one_by_one(shard_dirs, name), CHUNK_ROWS):
        while len(chunk):
            if index is None:
                index = Index(ndim=chunk.shape[1], metric="cos", dtype="f16")
            part, chunk = chunk[:segment_rows - len(index)], chunk[segment_rows - len(index):]
            index.add(np.arange(row, row + len(part), dtype=np.uint64), part, threads=threads)
            row += len(part)
            if len(index) == segment_rows or row == rows:
                _save(index, paths[segment])
                index, segment = None, segment + 1


def _save(index: Any, path: Path) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    index.save(str(temporary))
    temporary.replace(path)


def needs_index(rows: int) -> bool:
    """Whether a layer of `rows` vectors gets an HNSW index (a smaller one is always searched exactly)."""
    return rows > EXACT_UP_TO


def exact_search(arrays: Iterable[npt.NDArray[Any]], query: npt.NDArray[Any],
                 k: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """(rows, cosine similarities) of the k rows of the stacked `arrays` nearest to `query`, best first (ties: the
    lower row first); scored in float64, so near-equal scores (the [CLS] of similar texts) keep one order, and a
    chunk at a time, so memory stays bounded."""
    tiny = torch.finfo(torch.float64).tiny
    q = torch.from_numpy(np.asarray(query, dtype=np.float64).reshape(-1))
    q = q / q.norm().clamp_min(tiny)
    chunk_scores = [np.zeros(0)]
    for chunk in chunks(arrays, CHUNK_ROWS):
        v = torch.from_numpy(chunk.astype(np.float64))
        chunk_scores.append((v @ q / torch.linalg.vector_norm(v, dim=1).clamp_min(tiny)).numpy())
    scores = np.concatenate(chunk_scores)
    rows = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return rows, scores[rows]


def search(shard_dirs: list[Path], index: list[Path] | None, layer: int, query: npt.NDArray[Any], k: int,
           exact: bool | None, rows: int, segment_rows: int | None = None) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """(rows, cosine similarities) of the k stored vectors of `layer` nearest to `query`, best first: through the
    HNSW segments in `index` (of `segment_rows` vectors each, `rows` in all) where the layer has them and `exact` is
    not True, else exactly over the shards' arrays. A segment that does not load, or does not hold the vectors it
    should, is an error naming it."""
    if exact is not True and index:
        found_keys, found_scores = [np.zeros(0, np.int64)], [np.zeros(0)]
        for path, size in zip(index, segment_sizes(rows, segment_rows or rows)):
            graph = open_index(path, len(query), size)
            matches = graph.search(np.asarray(query, dtype=np.float32), min(k, size), exact=False)
            found_keys.append(matches.keys.astype(np.int64))
            found_scores.append(1.0 - matches.distances.astype(np.float64))
        keys, scores = np.concatenate(found_keys), np.concatenate(found_scores)
        best = np.lexsort((keys, -scores))[:k]
        return keys[best], scores[best]
    return exact_search(one_by_one(shard_dirs, hidden_file(layer)), query, k)


def open_index(index: Path, ndim: int, rows: int) -> Any:
    """The usearch index in `index`, memory-mapped; a ValueError naming the file where it is not one of `rows`
    vectors of `ndim` dimensions."""
    from usearch.index import Index

    try:
        graph = Index.restore(str(index), view=True)
    except Exception as error:  # noqa: BLE001 - usearch raises RuntimeError, ValueError or others for a bad file
        raise ValueError(f"{named(index)} is not a usearch index ({first_line(error)}); {DAMAGED}.") from None
    if graph is None or graph.ndim != ndim or len(graph) != rows:
        found = "nothing" if graph is None else f"{len(graph)} vectors of {graph.ndim} dimensions"
        raise ValueError(f"{named(index)} holds {found} where the corpus stores {rows} vectors of {ndim} there; "
                         f"{DAMAGED}.")
    return graph


def project_2d(points: npt.NDArray[Any], method: str, seed: int) -> npt.NDArray[Any]:
    """(n, 2) projection: PCA through torch (signs fixed: each axis' largest loading positive), or UMAP."""
    if method == "pca":
        x = torch.from_numpy(np.asarray(points, dtype=np.float64))
        x = x - x.mean(0)
        _, _, vh = torch.linalg.svd(x, full_matrices=False)
        axes = vh[:2]  # (2, dim)
        signs = torch.sign(axes.gather(1, axes.abs().argmax(1, keepdim=True)))
        projected: npt.NDArray[Any] = (x @ (axes * signs).T).numpy()
        return projected
    if method == "umap":
        try:
            import umap
        except ImportError:
            raise ImportError("method='umap' needs the umap-learn package: pip install umap-learn") from None
        embedded: npt.NDArray[Any] = umap.UMAP(n_components=2, random_state=seed).fit_transform(points)
        return embedded
    raise ValueError(f"method={method!r} is not a projection; expected 'pca' or 'umap'.")
