"""Shared fixtures for the training tests: a WordPiece tokenizer trained once on the built-in corpus
(`wordpiece_tokenizer`, and its folder), small pair datasets, and a small BERTForPreTraining factory on the shared
tiny config."""

from __future__ import annotations

import os

import pytest
import torch
from tiny_models import tiny_config

from bertviz_lab.model import BERTForPreTraining, BERTTokenizerFast
from bertviz_lab.train.data import SentencePairDataset, load_documents, split_documents

SEQ_LEN = 32


@pytest.fixture(scope="session")
def documents() -> tuple[list[str], list[str]]:
    """The built-in corpus split into (train, test) documents."""
    return split_documents(load_documents("builtin"), 0.2, seed=0)


@pytest.fixture(scope="session")
def wordpiece_tokenizer(documents) -> BERTTokenizerFast:
    """A small WordPiece vocabulary trained once per session (the same in every process, and worth sharing)."""
    return BERTTokenizerFast.train_from_texts(documents[0], vocab_size=500)


@pytest.fixture(scope="session")
def wordpiece_tokenizer_dir(wordpiece_tokenizer, tmp_path_factory) -> str:
    """wordpiece_tokenizer saved in a folder, for runs in other processes."""
    folder = tmp_path_factory.mktemp("tokenizer")
    wordpiece_tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="session")
def pairs(documents, wordpiece_tokenizer) -> tuple[SentencePairDataset, SentencePairDataset]:
    """(train, test) NSP pair datasets of SEQ_LEN tokens."""
    train, test = documents
    return (SentencePairDataset(train, wordpiece_tokenizer, SEQ_LEN, seed=0),
            SentencePairDataset(test, wordpiece_tokenizer, SEQ_LEN, seed=0))


@pytest.fixture
def make_model():
    """Factory for a 1-layer, 32-wide BERTForPreTraining: make_model(vocab_size, seed=0, dropout=0.1)."""
    return small_model


def small_model(vocab_size: int, seed: int = 0, dropout: float = 0.1) -> BERTForPreTraining:
    """A 1-layer, 32-wide BERTForPreTraining: a training step takes milliseconds."""
    torch.manual_seed(seed)
    config = tiny_config(vocab_size=vocab_size, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                         num_hidden_layers=1, max_position_embeddings=64, hidden_dropout_prob=dropout,
                         attention_probs_dropout_prob=dropout)
    return BERTForPreTraining(config)


@pytest.fixture
def child_env() -> dict[str, str]:
    """Environment for child Pythons: one thread each, no progress bars fighting for the terminal."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TQDM_DISABLE": "1"}


@pytest.fixture
def billion_laughs():
    """billion_laughs(levels, flow=False): a YAML alias bomb under data.corpus (flow: just the value)."""
    return alias_bomb


def alias_bomb(levels: int, flow: bool = False) -> str:
    """The "billion laughs" document under a known key: each level an anchored list of 9 aliases of the level below."""
    names = [chr(ord("a") + level) for level in range(levels)]
    items = [f"&a [{', '.join(['lol'] * 9)}]"] + [f"&{name} [{', '.join(['*' + below] * 9)}]"
                                                  for below, name in zip(names, names[1:])]
    if flow:
        return "[" + ", ".join(items) + "]"
    return "data:\n  corpus:\n" + "".join(f"    - {item}\n" for item in items)
