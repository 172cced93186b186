"""Token vectors: the raw arrays per shard (.npy, for brute-force checks and rebuilding) and a usearch index per
hidden layer for cosine nearest-neighbour search (`exact=True` is brute force over the same vectors).

usearch: a small maintained wheel (no OpenMP runtime of its own to clash with PyTorch's), HNSW for big corpora and
an exact mode on the same index, vectors kept in the index file so a search needs nothing else loaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

EXACT_UP_TO = 200_000  # vectors: below this a search is brute force by default (exact and still fast)


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


def build_index(vectors: np.ndarray, path: Path) -> None:
    """Write a cosine usearch index over `vectors` (keys = row numbers) to `path`, through a temporary file."""
    from usearch.index import Index

    index = Index(ndim=vectors.shape[1], metric="cos", dtype="f32")
    index.add(np.arange(len(vectors), dtype=np.uint64), vectors, threads=1)  # one thread: the same graph every run
    temporary = path.with_name(f".{path.name}.tmp")
    index.save(str(temporary))
    temporary.replace(path)


def search(path: Path, query: np.ndarray, k: int, exact: bool | None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cosine similarities) of the k stored vectors nearest to `query`, best first."""
    from usearch.index import Index

    index = Index.restore(str(path), view=True)
    exact = len(index) <= EXACT_UP_TO if exact is None else exact
    matches = index.search(np.asarray(query, dtype=np.float32), min(k, len(index)), exact=exact)
    return matches.keys.astype(np.int64), 1.0 - matches.distances.astype(np.float64)


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
