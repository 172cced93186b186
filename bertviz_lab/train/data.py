"""Pretraining data: documents -> sentences -> NSP pairs -> dynamically masked, padded batches.

NSP label convention (Hugging Face's): 0 = segment B is the text that follows A, 1 = B is a random
segment from another document.

The flow, each step its own small piece:
  load_documents(source)            raw texts (the built-in corpus, a list, a .txt file, a folder of .txt)
  SentencePairDataset(...)          tokenized sentences per document; `examples(epoch)` builds the epoch's
                                    `[CLS] A [SEP] B [SEP]` pairs (50% next, 50% random), seeded per epoch
  MaskingCollator                   pads a list of pairs to the longest and masks them 80/10/10 with its own
                                    seeded generator (dynamic masking: a new mask every time a pair is drawn)
  PairBatches / FixedBatches        endless, resumable stream of this process' share of each global batch
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

import torch

from bertviz_lab.model.pretraining import MASK_PROBABILITY, create_masked_lm_inputs
from bertviz_lab.train import schema
from bertviz_lab.train.synthetic import (  # noqa: F401  (data.py is where DESIGN.md lists synthetic batches)
    create_mlm_batch,
    create_nsp_pair_batch,
    generate_synthetic_bert_batches,
    synthetic_to_training_batch,
)

BUILTIN_CORPUS = "builtin"
SHORT_SEQ_PROB = schema.key("data.short_seq_prob").default  # the run config's defaults: one per setting
NEXT_SENTENCE, RANDOM_SENTENCE = 0, 1
BATCH_KEYS = ("input_ids", "token_type_ids", "attention_mask", "mlm_labels", "nsp_labels")

_DOCUMENT_BREAK = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")  # two or more blank lines
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_HEADING_RULE = re.compile(r"^\s*([*=~^\-#])\1{2,}\s*$")  # "*****" / "=====" lines under titles
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")


# documents -------------------------------------------------------------------------------------------
def builtin_documents() -> list[str]:
    """The Python documentation's topic pages (pydoc_data.topics ships with Python): real English, no download."""
    from pydoc_data.topics import topics

    return [topics[name] for name in sorted(topics)]


def load_documents(source: str | os.PathLike | Sequence[str]) -> list[str]:
    """Raw documents from "builtin", a list of str, a .txt file (split at 2+ blank lines) or a folder of .txt files."""
    if isinstance(source, (list, tuple)):
        for index, text in enumerate(source):
            if not isinstance(text, str):
                raise TypeError(f"documents[{index}] must be a str, got {type(text).__name__}.")
        documents = [text for text in source if text.strip()]
        origin = "the given list"
    elif isinstance(source, (str, os.PathLike)):
        if str(source) == BUILTIN_CORPUS:
            return builtin_documents()
        path = Path(source)
        if path.is_dir():
            files = sorted(path.glob("*.txt"))
            if not files:
                raise ValueError(f"corpus folder {str(path)!r} has no .txt files.")
            documents = [f.read_text(encoding="utf-8") for f in files]
        elif path.is_file():
            documents = _DOCUMENT_BREAK.split(path.read_text(encoding="utf-8"))
        else:
            raise FileNotFoundError(f"corpus {str(source)!r} is neither {BUILTIN_CORPUS!r}, a .txt file nor a folder "
                                    f"of .txt files.")
        documents = [text for text in documents if text.strip()]
        origin = repr(str(path))
    else:
        raise TypeError(f"corpus must be {BUILTIN_CORPUS!r}, a path or a list of str, got {type(source).__name__}.")
    if not documents:
        raise ValueError(f"the corpus from {origin} holds no text.")
    return documents


def split_sentences(document: str) -> list[str]:
    """Sentences of a document: paragraphs at blank lines, heading rules dropped, split after . ! ? before a capital."""
    sentences: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(document):
        lines = [line for line in paragraph.splitlines() if line.strip() and not _HEADING_RULE.match(line)]
        text = " ".join(" ".join(lines).split())
        if text:
            sentences.extend(part for part in _SENTENCE_END.split(text) if part.strip())
    return sentences


def split_documents(documents: Sequence[str], test_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """Hold out a seeded share of whole documents for evaluation: (train, test)."""
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction!r}.")
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    n_test = round(len(documents) * test_fraction)
    if test_fraction > 0 and (n_test < 2 or len(documents) - n_test < 2):
        raise ValueError(f"test_fraction={test_fraction} of {len(documents)} documents leaves fewer than 2 documents "
                         f"on one side; NSP needs at least 2 on each (use more documents or another fraction).")
    test = sorted(order[:n_test])
    train = sorted(order[n_test:])
    return [documents[i] for i in train], [documents[i] for i in test]


# pairs -----------------------------------------------------------------------------------------------
class PretrainingExample(NamedTuple):
    """One NSP pair before masking: token ids of A and B (no special tokens) and the NSP label."""

    tokens_a: list[int]
    tokens_b: list[int]
    nsp_label: int  # 0 = B follows A, 1 = B is random


class SpecialIds(NamedTuple):
    """The ids a collator needs from a tokenizer."""

    cls: int
    sep: int
    pad: int
    mask: int
    all_special: tuple[int, ...]
    vocab_size: int

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> "SpecialIds":
        """Read [CLS]/[SEP]/[PAD]/[MASK], every special id and the vocabulary size from a BERTTokenizerFast."""
        return cls(tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id, tokenizer.mask_token_id,
                   tuple(tokenizer.all_special_ids), len(tokenizer))


def _truncate_pair(tokens_a: list[int], tokens_b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Trim the longer segment, from its front or back at random, until the pair fits (as BERT did)."""
    while len(tokens_a) + len(tokens_b) > max_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        del longer[0 if rng.random() < 0.5 else -1]


class SentencePairDataset:
    """Tokenized documents that yield a fresh, seeded set of NSP pairs per epoch (BERT's create_pretraining_data)."""

    def __init__(self, documents: Iterable[str], tokenizer: Any, max_seq_length: int = 128, *, seed: int = 0,
                 short_seq_prob: float = SHORT_SEQ_PROB) -> None:
        if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or max_seq_length < 8:
            raise ValueError(f"max_seq_length must be an int >= 8, got {max_seq_length!r}.")
        if not 0.0 <= short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob!r}.")
        self.max_seq_length, self.seed, self.short_seq_prob = max_seq_length, seed, short_seq_prob
        self.special_ids = SpecialIds.from_tokenizer(tokenizer)
        self.documents = self._tokenize(list(documents), tokenizer, max_seq_length - 3)
        if len(self.documents) < 2:
            raise ValueError(f"NSP needs at least 2 non-empty documents, got {len(self.documents)}.")
        self._cache: tuple[int, list[PretrainingExample]] | None = None

    @staticmethod
    def _tokenize(documents: list[str], tokenizer: Any, piece_length: int) -> list[list[list[int]]]:
        """Each document as a list of sentences of token ids; sentences longer than a pair allows are cut in pieces."""
        backend = tokenizer.backend_tokenizer  # no padding or truncation set on it
        tokenized = []
        for document in documents:
            sentences = split_sentences(document)
            if not sentences:
                continue
            pieces: list[list[int]] = []
            for encoding in backend.encode_batch(sentences, add_special_tokens=False):
                ids = encoding.ids
                pieces.extend(ids[i:i + piece_length] for i in range(0, len(ids), piece_length))
            if pieces:
                tokenized.append(pieces)
        return tokenized

    @property
    def num_tokens(self) -> int:
        """Word-piece tokens in the dataset (without special tokens)."""
        return sum(len(s) for doc in self.documents for s in doc)

    def examples(self, epoch: int = 0) -> list[PretrainingExample]:
        """The epoch's pairs: seeded by (seed, epoch), so every process and every resumed run builds the same list."""
        if self._cache is None or self._cache[0] != epoch:
            self._cache = (epoch, self._build(random.Random(f"{self.seed}/{epoch}")))
        return self._cache[1]

    def __len__(self) -> int:
        return len(self.examples(0))

    def _build(self, rng: random.Random) -> list[PretrainingExample]:
        max_tokens = self.max_seq_length - 3  # [CLS] A [SEP] B [SEP]
        out: list[PretrainingExample] = []
        for doc_index, sentences in enumerate(self.documents):
            chunk: list[list[int]] = []
            length, i = 0, 0
            target = self._target_length(rng, max_tokens)
            while i < len(sentences):
                chunk.append(sentences[i])
                length += len(sentences[i])
                if i == len(sentences) - 1 or length >= target:
                    example, unused = self._pair(rng, doc_index, chunk, target, max_tokens)
                    if example is not None:
                        out.append(example)
                    i -= unused  # sentences not used by A start the next chunk
                    chunk, length = [], 0
                    target = self._target_length(rng, max_tokens)
                i += 1
        return out

    def _target_length(self, rng: random.Random, max_tokens: int) -> int:
        return rng.randint(2, max_tokens) if rng.random() < self.short_seq_prob else max_tokens

    def _pair(self, rng: random.Random, doc_index: int, chunk: list[list[int]], target: int,
              max_tokens: int) -> tuple[PretrainingExample | None, int]:
        """Split a chunk into A and B (at a sentence end, or inside a lone sentence); half the time B is random instead.

        Returns the example (None when the chunk is too short) and how many sentences of the chunk went unused.
        """
        if len(chunk) >= 2:
            a_end = rng.randint(1, len(chunk) - 1)
            tokens_a = [t for s in chunk[:a_end] for t in s]
            tokens_next = [t for s in chunk[a_end:] for t in s]
            unused_if_random = len(chunk) - a_end
        elif len(chunk[0]) >= 2:
            cut = rng.randint(1, len(chunk[0]) - 1)
            tokens_a, tokens_next, unused_if_random = chunk[0][:cut], chunk[0][cut:], 0
        else:
            return None, 0
        if rng.random() < 0.5:
            tokens_b = self._random_segment(rng, doc_index, max(1, target - len(tokens_a)))
            label, unused = RANDOM_SENTENCE, unused_if_random
        else:
            tokens_b, label, unused = tokens_next, NEXT_SENTENCE, 0
        _truncate_pair(tokens_a, tokens_b, max_tokens, rng)
        return PretrainingExample(tokens_a, tokens_b, label), unused

    def _random_segment(self, rng: random.Random, doc_index: int, length: int) -> list[int]:
        """Consecutive sentences from a random other document, starting at a random sentence."""
        other = rng.randrange(len(self.documents) - 1)
        other += other >= doc_index
        sentences = self.documents[other]
        start = rng.randrange(len(sentences))
        tokens: list[int] = []
        for sentence in sentences[start:]:
            tokens.extend(sentence)
            if len(tokens) >= length:
                break
        return tokens


# masking collate -------------------------------------------------------------------------------------
class MaskingCollator:
    """Pairs -> padded (B, T) tensors with 80/10/10 masking drawn from its own seeded generator (dynamic masking)."""

    def __init__(self, special_ids: SpecialIds, mlm_probability: float = MASK_PROBABILITY, seed: int = 0) -> None:
        if not 0.0 <= mlm_probability <= 1.0:
            raise ValueError(f"mlm_probability must be in [0, 1], got {mlm_probability!r}.")
        self.special_ids, self.mlm_probability = special_ids, mlm_probability
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, examples: Sequence[PretrainingExample]) -> dict[str, torch.Tensor]:
        """Padded (B, T) masked input_ids, token_type_ids, attention_mask, mlm_labels (-100: none); (B,) nsp_labels."""
        if not examples:
            raise ValueError("cannot collate an empty list of examples.")
        ids = self.special_ids
        longest = max(len(e.tokens_a) + len(e.tokens_b) + 3 for e in examples)
        input_ids = torch.full((len(examples), longest), ids.pad, dtype=torch.long)
        token_type_ids = torch.zeros((len(examples), longest), dtype=torch.long)
        attention_mask = torch.zeros((len(examples), longest), dtype=torch.long)
        for row, example in enumerate(examples):
            a, b = example.tokens_a, example.tokens_b
            sequence = [ids.cls, *a, ids.sep, *b, ids.sep]
            input_ids[row, :len(sequence)] = torch.tensor(sequence)
            token_type_ids[row, len(a) + 2:len(sequence)] = 1
            attention_mask[row, :len(sequence)] = 1
        masked, labels = create_masked_lm_inputs(
            input_ids, vocab_size=ids.vocab_size, mask_token_id=ids.mask, special_token_ids=ids.all_special,
            attention_mask=attention_mask, mlm_probability=self.mlm_probability, generator=self.generator)
        nsp_labels = torch.tensor([e.nsp_label for e in examples], dtype=torch.long)
        return {"input_ids": masked, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
                "mlm_labels": labels, "nsp_labels": nsp_labels}

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.generator.set_state(state["generator"])


# sharding and streams --------------------------------------------------------------------------------
def shard_batch(batch: dict[str, torch.Tensor], rank: int, world_size: int) -> dict[str, torch.Tensor]:
    """This rank's contiguous rows of a global batch, with columns that are padding in every kept row removed."""
    rows = batch["input_ids"].shape[0]
    if rows % world_size:
        raise ValueError(f"a batch of {rows} rows cannot be split evenly across {world_size} processes.")
    size = rows // world_size
    shard = {k: v[rank * size:(rank + 1) * size] for k, v in batch.items()}
    if "attention_mask" in shard and shard["attention_mask"].numel():
        longest = int(shard["attention_mask"].sum(dim=1).max())
        shard = {k: (v[:, :longest] if v.dim() == 2 else v) for k, v in shard.items()}
    return shard


class PairBatches:
    """Endless stream of this process' share of each global micro-batch of a SentencePairDataset; resumable.

    Every process draws the same global batch (seeded order per epoch) and the same masking, then keeps its own
    rows: N processes see exactly the data one process would see with an N-times larger batch.
    """

    def __init__(self, dataset: SentencePairDataset, global_batch_size: int, *,
                 mlm_probability: float = MASK_PROBABILITY, seed: int = 0, rank: int = 0, world_size: int = 1,
                 shuffle: bool = True) -> None:
        if global_batch_size < 1 or global_batch_size % world_size:
            raise ValueError(f"global_batch_size ({global_batch_size}) must be a positive multiple of the number of "
                             f"processes ({world_size}).")
        self.dataset, self.global_batch_size = dataset, global_batch_size
        self.rank, self.world_size, self.seed, self.shuffle = rank, world_size, seed, shuffle
        self.collator = MaskingCollator(dataset.special_ids, mlm_probability, seed)
        self.epoch, self.position = 0, 0
        self._order: tuple[int, list[int]] | None = None

    def batches_per_epoch(self, epoch: int | None = None) -> int:
        """Full global batches in an epoch (the incomplete last one is dropped)."""
        return len(self.dataset.examples(self.epoch if epoch is None else epoch)) // self.global_batch_size

    def _epoch_order(self) -> list[int]:
        if self._order is None or self._order[0] != self.epoch:
            n = len(self.dataset.examples(self.epoch))
            if self.shuffle:
                generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
                order = torch.randperm(n, generator=generator).tolist()
            else:
                order = list(range(n))
            self._order = (self.epoch, order)
        return self._order[1]

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        return self

    def __next__(self) -> dict[str, torch.Tensor]:
        if self.batches_per_epoch() == 0:
            raise ValueError(f"the dataset has {len(self.dataset.examples(self.epoch))} pairs, fewer than one global "
                             f"batch of {self.global_batch_size}; use a smaller batch or more text.")
        if self.position >= self.batches_per_epoch():
            self.epoch, self.position = self.epoch + 1, 0
        order = self._epoch_order()
        start = self.position * self.global_batch_size
        examples = self.dataset.examples(self.epoch)
        batch = self.collator([examples[i] for i in order[start:start + self.global_batch_size]])
        self.position += 1
        return shard_batch(batch, self.rank, self.world_size)

    def state_dict(self) -> dict[str, Any]:
        """Where the stream is (epoch, batch position) and the masking generator's state."""
        return {"epoch": self.epoch, "position": self.position, "collator": self.collator.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self.collator.load_state_dict(state["collator"])


class FixedBatches:
    """Endless, resumable stream cycling over ready global batches (e.g. synthetic ones), this process' rows of each."""

    def __init__(self, batches: Sequence[dict[str, torch.Tensor]], *, rank: int = 0, world_size: int = 1) -> None:
        if not batches:
            raise ValueError("FixedBatches needs at least one batch.")
        for index, batch in enumerate(batches):
            missing = [k for k in BATCH_KEYS if k not in batch]
            if missing:
                raise ValueError(f"batch {index} lacks {missing}; a training batch holds {list(BATCH_KEYS)}.")
        self.batches, self.rank, self.world_size = list(batches), rank, world_size
        self.epoch, self.position = 0, 0

    def batches_per_epoch(self, epoch: int | None = None) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        return self

    def __next__(self) -> dict[str, torch.Tensor]:
        if self.position >= len(self.batches):
            self.epoch, self.position = self.epoch + 1, 0
        batch = self.batches[self.position]
        self.position += 1
        return shard_batch(batch, self.rank, self.world_size)

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def evaluation_batches(data: SentencePairDataset | Sequence[dict[str, torch.Tensor]], batch_size: int, *,
                       mlm_probability: float = MASK_PROBABILITY, seed: int = 0, rank: int = 0,
                       world_size: int = 1) -> list[dict[str, torch.Tensor]]:
    """Held-out batches masked once with a fixed seed (every evaluation scores the same task); this rank's rows."""
    if isinstance(data, SentencePairDataset):
        collator = MaskingCollator(data.special_ids, mlm_probability, seed)
        examples = data.examples(0)
        batches = [collator(examples[i:i + batch_size]) for i in range(0, len(examples), batch_size)]
    else:
        batches = list(data)
    shards = []
    for batch in batches:
        rows = batch["input_ids"].shape[0]
        bounds = [rows * r // world_size for r in range(world_size + 1)]  # uneven tails are fine for evaluation
        shard = {k: v[bounds[rank]:bounds[rank + 1]] for k, v in batch.items()}
        if shard["input_ids"].shape[0]:
            shards.append(shard)
    return shards
