"""Pretraining data: documents, sentence split, NSP pairs, the masking collator, and the sharded, resumable streams."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from bertviz_lab.model.pretraining import IGNORE_INDEX
from bertviz_lab.train.data import (
    FixedBatches,
    MaskingCollator,
    PairBatches,
    SentencePairDataset,
    builtin_documents,
    evaluation_batches,
    load_documents,
    shard_batch,
    split_documents,
    split_sentences,
)


def test_builtin_corpus_is_real_english_from_the_standard_library():
    documents = builtin_documents()
    assert len(documents) > 50
    assert sum(len(d) for d in documents) > 100_000
    assert any("assert" in d for d in documents)
    assert load_documents("builtin") == documents


def test_load_documents_from_list_file_and_folder(tmp_path):
    assert load_documents(["one text", "  ", "two"]) == ["one text", "two"]
    file = tmp_path / "corpus.txt"
    file.write_text("First doc. Still first.\n\nSame paragraph group.\n\n\nSecond doc here.\n", encoding="utf-8")
    assert len(load_documents(file)) == 2
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "b.txt").write_text("Bee.", encoding="utf-8")
    (folder / "a.txt").write_text("Ay.", encoding="utf-8")
    (folder / "skip.md").write_text("not text", encoding="utf-8")
    assert load_documents(folder) == ["Ay.", "Bee."]


def test_load_documents_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_documents(tmp_path / "nowhere")
    with pytest.raises(TypeError, match=r"documents\[1\]"):
        load_documents(["ok", 3])
    with pytest.raises(ValueError, match="no .txt files"):
        load_documents(tmp_path)
    with pytest.raises(ValueError, match="holds no text"):
        load_documents([" "])


def test_split_sentences_drops_heading_rules_and_splits_at_sentence_ends():
    text = "Title\n*****\n\nOne sentence here. Another one follows!\nSame paragraph? Yes.\n\nA new paragraph"
    assert split_sentences(text) == ["Title", "One sentence here.", "Another one follows!", "Same paragraph?", "Yes.",
                                     "A new paragraph"]


def test_split_documents_is_seeded_and_disjoint():
    documents = [f"doc {i}" for i in range(20)]
    train, test = split_documents(documents, 0.25, seed=3)
    assert len(test) == 5 and not set(train) & set(test) and set(train) | set(test) == set(documents)
    assert split_documents(documents, 0.25, seed=3) == (train, test)
    with pytest.raises(ValueError, match="test_fraction"):
        split_documents(documents, 1.5, seed=0)


def test_pairs_follow_the_nsp_convention_and_fit(pairs, wordpiece_tokenizer):
    train, _ = pairs
    examples = train.examples(0)
    labels = Counter(e.nsp_label for e in examples)
    assert set(labels) == {0, 1}
    assert abs(labels[0] - labels[1]) < 0.1 * len(examples)  # about half next (0), half random (1)
    assert all(len(e.tokens_a) + len(e.tokens_b) + 3 <= train.max_seq_length for e in examples)
    assert all(e.tokens_a and e.tokens_b for e in examples)
    # label 0: B comes after A in A's document (truncation may trim the ends of A and B); label 1: from another one
    docs = [[t for s in doc for t in s] for doc in train.documents]
    for example in [e for e in examples if e.nsp_label == 0][:20]:
        found = [(d, _find(doc, example.tokens_a)) for d, doc in enumerate(docs) if _find(doc, example.tokens_a) >= 0]
        assert any(_find(docs[d], example.tokens_b, start + len(example.tokens_a)) >= 0 for d, start in found)


def _find(haystack: list[int], needle: list[int], start: int = 0) -> int:
    """Index of the first occurrence of needle in haystack at or after start, or -1."""
    n = len(needle)
    for i in range(start, len(haystack) - n + 1):
        if haystack[i:i + n] == needle:
            return i
    return -1


def test_pairs_are_reproducible_per_epoch_and_change_between_epochs(pairs, documents, wordpiece_tokenizer):
    train, _ = pairs
    again = SentencePairDataset(documents[0], wordpiece_tokenizer, train.max_seq_length, seed=0)
    assert again.examples(0) == train.examples(0)
    assert train.examples(1) != train.examples(0)
    assert SentencePairDataset(documents[0], wordpiece_tokenizer, train.max_seq_length,
                               seed=1).examples(0) != train.examples(0)


def test_dataset_argument_errors(wordpiece_tokenizer):
    with pytest.raises(ValueError, match="max_seq_length"):
        SentencePairDataset(["a b c. d e f."] * 3, wordpiece_tokenizer, 4)
    with pytest.raises(ValueError, match="at least 2"):
        SentencePairDataset(["only one document. With two sentences."], wordpiece_tokenizer, 32)


def test_collator_builds_cls_a_sep_b_sep_pads_to_the_longest_and_masks(pairs, wordpiece_tokenizer):
    train, _ = pairs
    examples = train.examples(0)[:16]
    collator = MaskingCollator(train.special_ids, mlm_probability=0.3, seed=0)
    batch = collator(examples)
    longest = max(len(e.tokens_a) + len(e.tokens_b) + 3 for e in examples)
    assert batch["input_ids"].shape == (16, longest) and batch["nsp_labels"].tolist() == [e.nsp_label for e in examples]
    for row, e in enumerate(examples):
        n, a = len(e.tokens_a) + len(e.tokens_b) + 3, len(e.tokens_a)
        ids, labels = batch["input_ids"][row], batch["mlm_labels"][row]
        original = torch.where(labels != IGNORE_INDEX, labels, ids)
        assert original[:n].tolist() == [wordpiece_tokenizer.cls_token_id, *e.tokens_a,
                                         wordpiece_tokenizer.sep_token_id, *e.tokens_b,
                                         wordpiece_tokenizer.sep_token_id]
        assert batch["token_type_ids"][row].tolist() == [0] * (a + 2) + [1] * (n - a - 2) + [0] * (longest - n)
        assert batch["attention_mask"][row].tolist() == [1] * n + [0] * (longest - n)
        assert (ids[n:] == wordpiece_tokenizer.pad_token_id).all()
        specials = torch.tensor([0, a + 1, n - 1])
        assert (labels[specials] == IGNORE_INDEX).all() and (labels[n:] == IGNORE_INDEX).all()
    selected = batch["mlm_labels"] != IGNORE_INDEX
    share = selected.sum() / batch["attention_mask"].sum()
    assert 0.2 < share < 0.4
    masked = batch["input_ids"][selected] == wordpiece_tokenizer.mask_token_id
    assert 0.65 < masked.float().mean() < 0.95  # 80% [MASK]


def test_masking_is_dynamic_and_seeded(pairs):
    train, _ = pairs
    examples = train.examples(0)[:8]
    first = MaskingCollator(train.special_ids, seed=5)
    a, b = first(examples), first(examples)
    assert not torch.equal(a["mlm_labels"], b["mlm_labels"])  # a new mask each time a pair is drawn
    assert torch.equal(MaskingCollator(train.special_ids, seed=5)(examples)["mlm_labels"], a["mlm_labels"])


def test_pair_batches_resume_exactly_from_a_state_dict(pairs):
    train, _ = pairs
    stream = PairBatches(train, 8, seed=1)
    for _ in range(3):
        next(stream)
    state = stream.state_dict()
    expected = [next(stream) for _ in range(3)]
    resumed = PairBatches(train, 8, seed=1)
    resumed.load_state_dict(state)
    for want, got in zip(expected, (next(resumed) for _ in range(3))):
        assert all(torch.equal(want[k], got[k]) for k in want)


def test_pair_batches_roll_over_into_a_new_epoch(pairs):
    train, _ = pairs
    stream = PairBatches(train, 64, seed=0)
    per_epoch = stream.batches_per_epoch()
    for _ in range(per_epoch + 1):
        next(stream)
    assert (stream.epoch, stream.position) == (1, 1)


def test_shards_of_n_processes_add_up_to_the_single_process_batch(pairs):
    train, _ = pairs
    single = next(PairBatches(train, 8, seed=2))
    shards = [next(PairBatches(train, 8, seed=2, rank=r, world_size=2)) for r in range(2)]
    for key in single:
        if single[key].dim() == 1:
            assert torch.equal(torch.cat([s[key] for s in shards]), single[key])
        else:
            for rows, shard in zip(single[key].split(4), shards):
                width = shard[key].shape[1]
                assert torch.equal(rows[:, :width], shard[key])
                assert (rows[:, width:] == (0 if key != "mlm_labels" else IGNORE_INDEX)).all()


def test_shard_and_stream_errors(pairs):
    train, _ = pairs
    with pytest.raises(ValueError, match="multiple"):
        PairBatches(train, 7, world_size=2)
    with pytest.raises(ValueError, match="evenly"):
        shard_batch({"input_ids": torch.zeros(3, 4)}, 0, 2)
    with pytest.raises(ValueError, match="fewer than one global batch"):
        next(PairBatches(train, 10**6))
    with pytest.raises(ValueError, match="lacks"):
        FixedBatches([{"input_ids": torch.zeros(2, 3)}])


def test_evaluation_batches_are_fixed_and_cover_every_pair_once(pairs):
    _, test = pairs
    first = evaluation_batches(test, 16, seed=3)
    second = evaluation_batches(test, 16, seed=3)
    assert all(torch.equal(a["mlm_labels"], b["mlm_labels"]) for a, b in zip(first, second))
    assert sum(b["nsp_labels"].numel() for b in first) == len(test.examples(0))
    halves = [evaluation_batches(test, 16, seed=3, rank=r, world_size=3) for r in range(3)]
    assert sum(b["nsp_labels"].numel() for h in halves for b in h) == len(test.examples(0))
