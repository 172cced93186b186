"""Corpus analysis: per-head attention statistics computed on the device over thousands of texts, Parquet tables
queried with DuckDB, a vector index for nearest contexts, query-key maps. `analyze(...)` writes a folder,
`Corpus.open(folder)` reads it back."""

from __future__ import annotations

from pathlib import Path

from bertviz_lab.corpus.analyze import analyze
from bertviz_lab.corpus.corpus import Corpus
from bertviz_lab.corpus.statistics import STATISTICS

SENTENCES = Path(__file__).parent / "data" / "sentences.txt"  # the built-in corpus: 420 English sentences

__all__ = ["analyze", "Corpus", "STATISTICS", "SENTENCES"]
