"""Shared by the corpus tests: the packaged MiniLM and tokenizer (loaded once), a small corpus of the built-in
sentences plus sentence pairs, and a child-process environment."""

from __future__ import annotations

import os

import pytest

import bertviz_lab
from bertviz_lab.corpus import SENTENCES


@pytest.fixture(scope="session")
def minilm():
    """(model, tokenizer): the packaged all-MiniLM-L6-v2."""
    return bertviz_lab.load_default()


@pytest.fixture(scope="session")
def small_texts() -> list:
    """30 built-in sentences of varied length and 4 sentence pairs."""
    lines = SENTENCES.read_text(encoding="utf-8").splitlines()
    return lines[:30] + [("Is it raining?", "No, it is sunny."), ("Where is the key?", "Under the mat; look!"),
                         (lines[40], lines[41]), ("A", "B.")]


@pytest.fixture(scope="session")
def small_corpus(minilm, small_texts, tmp_path_factory):
    """The small texts analysed with hidden states at layers 1 and 4 and queries/keys, in shards of 8 texts."""
    from bertviz_lab.corpus import analyze

    model, tokenizer = minilm
    out = tmp_path_factory.mktemp("corpus") / "small"
    return analyze(model, tokenizer, small_texts, out, vectors=("hidden", "qk"), layers=None, batch_size=5,
                   shard_size=8, progress=False)


@pytest.fixture
def child_env() -> dict[str, str]:
    """Environment for child Pythons: one thread each, no progress bars."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
