"""Synthetic MLM/NSP batches (the BERT-from-scratch seed's API) as torch tensors, for tests and quick experiments.

Every function returns a `SyntheticBatch` (a NamedTuple, so it unpacks like the seed's 5-tuple):
  input_ids        (B, T) long   `[CLS] ... [SEP]` (or `[CLS] A [SEP] B [SEP]`), masked positions replaced 80/10/10
  segment_ids      (B, T) long   0 for [CLS], A and its [SEP]; 1 for B and the final [SEP]
  masked_positions (B, K) long   indices of the masked positions of each row, padded with -1
  mlm_labels       (B, K) long   the original id at each masked position, padded with -100 (the ignore index)
  nsp_labels       (B,)   long   0 = B follows A ("next"), 1 = B is random. NB: the seed used 1 for "next";
                                 this package follows Hugging Face (0 = next) everywhere.
K is the largest number of masked positions of any row (at least 1). Token ids follow the layout of
`BERTTokenizerFast.train_from_texts`: [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4; random text uses ids >= 5.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from bertviz_lab.model.pretraining import IGNORE_INDEX, MASK_PROBABILITY, create_masked_lm_inputs

PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = 0, 1, 2, 3, 4
FIRST_TEXT_ID = 5
SPECIAL_IDS = (PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID)
NO_POSITION = -1


class SyntheticBatch(NamedTuple):
    """One synthetic batch; shapes in the module docstring."""

    input_ids: torch.Tensor
    segment_ids: torch.Tensor
    masked_positions: torch.Tensor
    mlm_labels: torch.Tensor
    nsp_labels: torch.Tensor


def _check_sizes(batch_size: int, seq_len: int, vocab_size: int, min_seq_len: int) -> None:
    for name, value, low in (("batch_size", batch_size, 1), ("seq_len", seq_len, min_seq_len),
                             ("vocab_size", vocab_size, FIRST_TEXT_ID + 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")


def _generator(random_seed: int | None) -> torch.Generator:
    generator = torch.Generator()
    if random_seed is None:
        generator.seed()
    else:
        generator.manual_seed(int(random_seed))
    return generator


def _mask(input_ids: torch.Tensor, vocab_size: int, mask_prob: float,
          generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """80/10/10 masking of text tokens, then the (B, K) positions and labels of what was selected."""
    masked, dense_labels = create_masked_lm_inputs(input_ids, vocab_size=vocab_size, mask_token_id=MASK_ID,
                                                   special_token_ids=SPECIAL_IDS, mlm_probability=mask_prob,
                                                   generator=generator)
    selected = dense_labels != IGNORE_INDEX
    width = max(1, int(selected.sum(dim=1).max()) if selected.numel() else 1)
    positions = torch.full((input_ids.shape[0], width), NO_POSITION, dtype=torch.long)
    labels = torch.full((input_ids.shape[0], width), IGNORE_INDEX, dtype=torch.long)
    for row in range(input_ids.shape[0]):
        where = selected[row].nonzero().squeeze(1)
        positions[row, :len(where)] = where
        labels[row, :len(where)] = dense_labels[row, where]
    return masked, positions, labels


def create_mlm_batch(batch_size: int, seq_len: int, vocab_size: int, mask_prob: float = MASK_PROBABILITY,
                     random_seed: int | None = None) -> SyntheticBatch:
    """Single-segment `[CLS] random text [SEP]` rows, masked 80/10/10; nsp_labels are all 0 (one segment = "next")."""
    _check_sizes(batch_size, seq_len, vocab_size, 3)
    generator = _generator(random_seed)
    input_ids = torch.randint(FIRST_TEXT_ID, vocab_size, (batch_size, seq_len), generator=generator)
    input_ids[:, 0], input_ids[:, -1] = CLS_ID, SEP_ID
    masked, positions, labels = _mask(input_ids, vocab_size, mask_prob, generator)
    segment_ids = torch.zeros((batch_size, seq_len), dtype=torch.long)
    return SyntheticBatch(masked, segment_ids, positions, labels, torch.zeros(batch_size, dtype=torch.long))


def create_nsp_pair_batch(batch_size: int, seq_len: int, vocab_size: int, random_seed: int | None = None, *,
                          mask_prob: float = 0.0) -> SyntheticBatch:
    """`[CLS] A [SEP] B [SEP]` rows: label 0 -> B repeats A ("next"), 1 -> B is random; unmasked by default."""
    _check_sizes(batch_size, seq_len, vocab_size, 5)
    generator = _generator(random_seed)
    half = (seq_len - 3) // 2
    b_len = seq_len - 3 - half
    nsp_labels = torch.randint(0, 2, (batch_size,), generator=generator)
    tokens_a = torch.randint(FIRST_TEXT_ID, vocab_size, (batch_size, half), generator=generator)
    random_b = torch.randint(FIRST_TEXT_ID, vocab_size, (batch_size, b_len), generator=generator)
    repeated_a = tokens_a[:, torch.arange(b_len) % max(half, 1)] if half else random_b
    tokens_b = torch.where((nsp_labels == 0)[:, None], repeated_a, random_b)
    column = lambda value: torch.full((batch_size, 1), value, dtype=torch.long)  # noqa: E731
    input_ids = torch.cat([column(CLS_ID), tokens_a, column(SEP_ID), tokens_b, column(SEP_ID)], dim=1)
    segment_ids = torch.zeros((batch_size, seq_len), dtype=torch.long)
    segment_ids[:, half + 2:] = 1
    masked, positions, labels = _mask(input_ids, vocab_size, mask_prob, generator)
    return SyntheticBatch(masked, segment_ids, positions, labels, nsp_labels)


def generate_synthetic_bert_batches(num_batches: int, batch_size: int, seq_len: int, vocab_size: int,
                                    mask_prob: float = MASK_PROBABILITY,
                                    random_seed: int | None = None) -> list[SyntheticBatch]:
    """`num_batches` batches, each an MLM batch or an NSP pair batch with equal odds, reproducible from random_seed."""
    if isinstance(num_batches, bool) or not isinstance(num_batches, int) or num_batches < 0:
        raise ValueError(f"num_batches must be an int >= 0, got {num_batches!r}.")
    generator = _generator(random_seed)
    batches = []
    for _ in range(num_batches):
        use_mlm = bool(torch.rand((), generator=generator) < 0.5)
        seed = int(torch.randint(0, 2**31 - 1, (), generator=generator))
        if use_mlm:
            batches.append(create_mlm_batch(batch_size, seq_len, vocab_size, mask_prob, seed))
        else:
            batches.append(create_nsp_pair_batch(batch_size, seq_len, vocab_size, seed))
    return batches


def synthetic_to_training_batch(batch: SyntheticBatch) -> dict[str, torch.Tensor]:
    """The Trainer's batch layout: (B, T) mlm_labels (-100 where not masked), token_type_ids and attention_mask."""
    input_ids, segment_ids, positions, labels, nsp_labels = batch
    dense = torch.full_like(input_ids, IGNORE_INDEX)
    rows = torch.arange(input_ids.shape[0])[:, None].expand_as(positions)
    valid = positions != NO_POSITION
    dense[rows[valid], positions[valid]] = labels[valid]
    return {"input_ids": input_ids, "token_type_ids": segment_ids,
            "attention_mask": (input_ids != PAD_ID).long(), "mlm_labels": dense, "nsp_labels": nsp_labels}
