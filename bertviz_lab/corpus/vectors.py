"""Token vectors: the raw arrays per shard (float16 .npy), searched exactly by cosine similarity, and for a layer too
big for that a usearch HNSW index searched approximately.

Up to EXACT_UP_TO vectors a layer is searched by brute force over its arrays (a matrix-vector product in float64:
~0.3 s at 200,000 vectors on two cores), exact and faster than building a graph would be; above, analyze builds a
usearch index (one small maintained wheel, no OpenMP runtime of its own to clash with PyTorch's, the vectors inside
the memory-mapped file) and `nearest()` walks its graph unless asked for an exact answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertviz_lab.corpus.folder import DAMAGED
from bertviz_lab.model.files import first_line, named

VECTOR_KINDS = ("hidden", "qk")  # what a corpus may store: hidden states, queries and keys
EXACT_UP_TO = 200_000  # vectors of a layer searched by brute force, with no HNSW graph built
CHUNK_ROWS = 32_768  # vectors scored at a time in an exact search (~100 MB as float64 at 384 dimensions)


def hidden_file(layer: int) -> str:
    return f"hidden-L{layer}.npy"


def qk_files(layer: int, head: int) -> tuple[str, str]:
    return f"q-L{layer}-H{head}.npy", f"k-L{layer}-H{head}.npy"


def index_file(layer: int) -> str:
    return f"hidden-L{layer}.usearch"


def stacked(shard_dirs: list[Path], name: str) -> np.ndarray:
    """One (rows, dim) float32 array of a vector file over the shards, in shard order."""
    parts = [np.load(folder / name, mmap_mode="r") for folder in shard_dirs]
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 0), np.float32)


def build_index(shard_dirs: list[Path], name: str, path: Path) -> None:
    """Write a cosine usearch index over the vector file `name` of every shard (keys = row numbers, in shard order)
    to `path`, through a temporary file. The vectors stream from each shard's memory-mapped file CHUNK_ROWS at a
    time, so no float32 copy of the whole layer is made beside the index; one thread adds them in row order, which
    gives the same graph, byte for byte, as adding them all at once."""
    from usearch.index import Index

    index, start = None, 0
    for folder in shard_dirs:
        array = np.load(folder / name, mmap_mode="r")
        if index is None:
            index = Index(ndim=array.shape[1], metric="cos", dtype="f32")
        for first in range(0, len(array), CHUNK_ROWS):
            chunk = np.asarray(array[first:first + CHUNK_ROWS], dtype=np.float32)
            index.add(np.arange(start + first, start + first + len(chunk), dtype=np.uint64), chunk, threads=1)
        start += len(array)
    if index is None:
        raise ValueError(f"no shard holds {name}: there is nothing to index.")
    temporary = path.with_name(f".{path.name}.tmp")
    index.save(str(temporary))
    temporary.replace(path)


def needs_index(rows: int) -> bool:
    """Whether a layer of `rows` vectors gets an HNSW index (a smaller one is always searched exactly)."""
    return rows > EXACT_UP_TO


def exact_search(arrays: list[np.ndarray], query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cosine similarities) of the k rows of the stacked `arrays` nearest to `query`, best first (ties: the
    lower row first); scored in float64, so near-equal scores (the [CLS] of similar texts) keep one order, and a
    chunk at a time, so memory stays bounded."""
    tiny = torch.finfo(torch.float64).tiny
    q = torch.from_numpy(np.asarray(query, dtype=np.float64).reshape(-1))
    q = q / q.norm().clamp_min(tiny)
    scores = [np.zeros(0)]
    for array in arrays:
        for first in range(0, len(array), CHUNK_ROWS):
            v = torch.from_numpy(np.asarray(array[first:first + CHUNK_ROWS], dtype=np.float64))
            scores.append((v @ q / torch.linalg.vector_norm(v, dim=1).clamp_min(tiny)).numpy())
    scores = np.concatenate(scores)
    rows = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return rows, scores[rows]


def search(shard_dirs: list[Path], index: Path | None, layer: int, query: np.ndarray, k: int,
           exact: bool | None, rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cosine similarities) of the k stored vectors of `layer` nearest to `query`, best first: through the
    HNSW `index` when the layer has one and `exact` is not True, else exactly over the shards' arrays. An index
    that does not load, or does not hold the `rows` vectors stored, is an error naming it."""
    if exact is not True and index is not None:
        graph = open_index(index, len(query), rows)
        matches = graph.search(np.asarray(query, dtype=np.float32), min(k, len(graph)), exact=False)
        return matches.keys.astype(np.int64), 1.0 - matches.distances.astype(np.float64)
    return exact_search([np.load(d / hidden_file(layer), mmap_mode="r") for d in shard_dirs], query, k)


def open_index(index: Path, ndim: int, rows: int | None) -> Any:
    """The usearch index in `index`, memory-mapped; a ValueError naming the file where it is not one of `rows`
    vectors of `ndim` dimensions."""
    from usearch.index import Index

    try:
        graph = Index.restore(str(index), view=True)
    except Exception as error:  # noqa: BLE001 - usearch raises RuntimeError, ValueError or others for a bad file
        raise ValueError(f"{named(index)} is not a usearch index ({first_line(error)}); {DAMAGED}.") from None
    if graph is None or graph.ndim != ndim or (rows is not None and len(graph) != rows):
        found = "nothing" if graph is None else f"{len(graph)} vectors of {graph.ndim} dimensions"
        expected = f"{rows} vectors" if rows is not None else "vectors"
        raise ValueError(f"{named(index)} holds {found} where the corpus stores {expected} of {ndim}; {DAMAGED}.")
    return graph


def project_2d(points: np.ndarray, method: str, seed: int) -> np.ndarray:
    """(n, 2) projection: PCA through torch (signs fixed: each axis' largest loading positive), or UMAP."""
    if method == "pca":
        x = torch.from_numpy(np.asarray(points, dtype=np.float64))
        x = x - x.mean(0)
        _, _, vh = torch.linalg.svd(x, full_matrices=False)
        axes = vh[:2]  # (2, dim)
        signs = torch.sign(axes.gather(1, axes.abs().argmax(1, keepdim=True)))
        return (x @ (axes * signs).T).numpy()
    if method == "umap":
        try:
            import umap
        except ImportError:
            raise ImportError("method='umap' needs the umap-learn package: pip install umap-learn") from None
        return umap.UMAP(n_components=2, random_state=seed).fit_transform(points)
    raise ValueError(f"method={method!r} is not a projection; expected 'pca' or 'umap'.")
