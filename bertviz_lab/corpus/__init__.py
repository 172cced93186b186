"""Corpus analysis: per-head attention statistics computed on the device over thousands of texts, Parquet tables
queried with DuckDB, a vector index for nearest contexts, query-key maps. `analyze(...)` writes a folder,
`Corpus.open(folder)` reads it back."""

from __future__ import annotations

from bertviz_lab.corpus.analyze import analyze
from bertviz_lab.corpus.corpus import Corpus
from bertviz_lab.corpus.statistics import STATISTICS

__all__ = ["analyze", "Corpus", "STATISTICS"]
