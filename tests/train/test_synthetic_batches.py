"""The seed's synthetic-data API as torch tensors: shapes, conventions, 80/10/10 masking, seeds."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab.model.pretraining import IGNORE_INDEX
from bertviz_lab.train import (
    create_mlm_batch,
    create_nsp_pair_batch,
    generate_synthetic_bert_batches,
    synthetic_to_training_batch,
)
from bertviz_lab.train.synthetic import CLS_ID, FIRST_TEXT_ID, MASK_ID, NO_POSITION, SEP_ID, SPECIAL_IDS


def test_create_mlm_batch_shapes_and_labels():
    input_ids, segment_ids, masked_positions, mlm_labels, nsp_labels = create_mlm_batch(4, 16, 100, random_seed=0)
    assert input_ids.shape == segment_ids.shape == (4, 16)
    assert masked_positions.shape == mlm_labels.shape and masked_positions.shape[0] == 4
    assert nsp_labels.shape == (4,) and (nsp_labels == 0).all()  # one segment: "next" in our convention
    assert all(t.dtype == torch.long for t in (input_ids, segment_ids, masked_positions, mlm_labels, nsp_labels))
    assert (input_ids[:, 0] == CLS_ID).all() and (input_ids[:, -1] == SEP_ID).all() and (segment_ids == 0).all()
    valid = masked_positions != NO_POSITION
    assert ((mlm_labels != IGNORE_INDEX) == valid).all()
    assert ((masked_positions[valid] > 0) & (masked_positions[valid] < 15)).all()  # never [CLS]/[SEP]
    assert (mlm_labels[valid] >= FIRST_TEXT_ID).all()


def test_masking_rates_are_80_10_10():
    batch = create_mlm_batch(256, 64, 1000, mask_prob=0.15, random_seed=1)
    valid = batch.masked_positions != NO_POSITION
    rows = torch.arange(256)[:, None].expand_as(batch.masked_positions)[valid]
    replaced = batch.input_ids[rows, batch.masked_positions[valid]]
    selected_share = valid.sum() / (256 * 62)
    assert 0.13 < selected_share < 0.17
    assert 0.77 < (replaced == MASK_ID).float().mean() < 0.83
    kept = (replaced == batch.mlm_labels[valid]).float().mean()
    assert 0.08 < kept < 0.13  # kept itself, plus the rare random pick of the same id


def test_nsp_pair_batch_follows_our_label_convention():
    batch = create_nsp_pair_batch(64, 21, 100, random_seed=2)
    half = (21 - 3) // 2
    assert batch.input_ids.shape == (64, 21) and set(batch.nsp_labels.tolist()) == {0, 1}
    assert (batch.input_ids[:, [0]] == CLS_ID).all() and (batch.input_ids[:, [half + 1, 20]] == SEP_ID).all()
    assert (batch.segment_ids[:, :half + 2] == 0).all() and (batch.segment_ids[:, half + 2:] == 1).all()
    a, b = batch.input_ids[:, 1:half + 1], batch.input_ids[:, half + 2:20]
    assert torch.equal(a[batch.nsp_labels == 0], b[batch.nsp_labels == 0][:, :half])  # 0 = next: B repeats A
    assert not torch.equal(a[batch.nsp_labels == 1], b[batch.nsp_labels == 1][:, :half])  # 1 = random
    assert (batch.masked_positions == NO_POSITION).all() and batch.masked_positions.shape == (64, 1)
    masked = create_nsp_pair_batch(8, 21, 100, random_seed=2, mask_prob=0.3)
    assert (masked.masked_positions != NO_POSITION).any()


def test_generate_is_reproducible_and_mixes_both_kinds():
    first = generate_synthetic_bert_batches(10, 4, 12, 50, random_seed=3)
    again = generate_synthetic_bert_batches(10, 4, 12, 50, random_seed=3)
    assert len(first) == 10
    assert all(torch.equal(x, y) for a, b in zip(first, again) for x, y in zip(a, b))
    kinds = {bool((b.segment_ids == 1).any()) for b in first}
    assert kinds == {True, False}
    other = generate_synthetic_bert_batches(1, 4, 12, 50, random_seed=4)[0]
    assert not all(torch.equal(x, y) for x, y in zip(first[0], other))


def test_to_training_batch_scatters_labels_back():
    batch = create_mlm_batch(3, 10, 60, mask_prob=0.5, random_seed=4)
    dense = synthetic_to_training_batch(batch)
    assert set(dense) == {"input_ids", "token_type_ids", "attention_mask", "mlm_labels", "nsp_labels"}
    assert dense["mlm_labels"].shape == (3, 10) and (dense["attention_mask"] == 1).all()
    rows, cols = (dense["mlm_labels"] != IGNORE_INDEX).nonzero(as_tuple=True)
    assert len(rows) == int((batch.masked_positions != NO_POSITION).sum())
    assert sorted(dense["mlm_labels"][rows, cols].tolist()) == sorted(
        batch.mlm_labels[batch.mlm_labels != IGNORE_INDEX].tolist())


def test_sizes_are_checked():
    with pytest.raises(ValueError, match="seq_len"):
        create_mlm_batch(2, 2, 100)
    with pytest.raises(ValueError, match="vocab_size"):
        create_nsp_pair_batch(2, 10, len(SPECIAL_IDS))
    with pytest.raises(ValueError, match="num_batches"):
        generate_synthetic_bert_batches(-1, 2, 10, 100)
