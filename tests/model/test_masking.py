"""BERT's 80/10/10 dynamic masking (pretraining.sample_masking / apply_masking / create_masked_lm_inputs):
rates on a large seeded batch, what may never be selected, labels, reproducibility, errors, and a property test."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tiny_models import tiny_config

from bertviz_lab.model import pretraining as P
from bertviz_lab.model.heads import BERTForMaskedLM

VOCAB = 30522
PAD, UNK, CLS, SEP, MASK = 0, 100, 101, 102, 103
SPECIAL_IDS = (PAD, UNK, CLS, SEP, MASK)


def _batch(batch: int = 64, seq_len: int = 512, seed: int = 0) -> dict[str, torch.Tensor]:
    """Sentence pairs `[CLS] a [SEP] b [SEP] [PAD]...` with some [UNK]/[MASK] ids in the text and a few ordinary
    ids flagged in special_tokens_mask (as a tokenizer may flag added tokens)."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(999, VOCAB, (batch, seq_len), generator=g)
    attention_mask = torch.ones(batch, seq_len, dtype=torch.long)
    special_tokens_mask = torch.zeros(batch, seq_len, dtype=torch.long)
    lengths = torch.randint(seq_len * 3 // 4, seq_len + 1, (batch,), generator=g)
    for row, length in enumerate(lengths.tolist()):
        middle = int(torch.randint(2, length - 1, (1,), generator=g))
        input_ids[row, 0], input_ids[row, middle], input_ids[row, length - 1] = CLS, SEP, SEP
        special_tokens_mask[row, [0, middle, length - 1]] = 1
        input_ids[row, length:] = PAD
        attention_mask[row, length:] = 0
        special_tokens_mask[row, length:] = 1
    # unknown words and literal [MASK] ids inside the text are special ids, never selected
    text = (special_tokens_mask == 0)
    sprinkle = torch.rand(batch, seq_len, generator=g)
    input_ids[text & (sprinkle < 0.01)] = UNK
    input_ids[text & (sprinkle >= 0.01) & (sprinkle < 0.015)] = MASK
    # ordinary ids flagged only by special_tokens_mask
    flagged = text & (sprinkle >= 0.015) & (sprinkle < 0.03)
    special_tokens_mask[flagged] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "special_tokens_mask": special_tokens_mask}


def _expected_eligible(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    ids = batch["input_ids"]
    return (batch["attention_mask"] == 1) & (batch["special_tokens_mask"] == 0) & \
        ~torch.isin(ids, torch.tensor(SPECIAL_IDS))


def _plan(batch: dict[str, torch.Tensor], **kwargs) -> P.MaskingPlan:
    return P.sample_masking(batch["input_ids"], vocab_size=VOCAB, special_token_ids=SPECIAL_IDS,
                            attention_mask=batch["attention_mask"], special_tokens_mask=batch["special_tokens_mask"],
                            **kwargs)


def _create(batch: dict[str, torch.Tensor], **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    return P.create_masked_lm_inputs(batch["input_ids"], vocab_size=VOCAB, mask_token_id=MASK,
                                     special_token_ids=SPECIAL_IDS, attention_mask=batch["attention_mask"],
                                     special_tokens_mask=batch["special_tokens_mask"], **kwargs)


@pytest.fixture(scope="module")
def batch():
    return _batch()


@pytest.fixture(scope="module")
def plan(batch):
    return _plan(batch, seed=1234)


# statistics ------------------------------------------------------------------------------------------
def test_batch_has_every_kind_of_position(batch):
    ids, eligible = batch["input_ids"], _expected_eligible(batch)
    assert (batch["attention_mask"] == 0).any()
    assert ((ids == UNK) & (batch["attention_mask"] == 1)).any()
    assert ((ids == MASK) & (batch["attention_mask"] == 1)).any()
    flagged_only = (batch["special_tokens_mask"] == 1) & ~torch.isin(ids, torch.tensor(SPECIAL_IDS))
    assert flagged_only.any()
    assert eligible.sum() > 25_000


def test_eligible_positions_are_exactly_the_ordinary_attended_tokens(batch, plan):
    assert torch.equal(plan.eligible, _expected_eligible(batch))


def test_selection_rate_is_fifteen_percent_of_eligible_tokens(plan):
    rate = plan.selected.sum().item() / plan.eligible.sum().item()
    assert abs(rate - 0.15) <= 0.01, rate


def test_selected_split_eighty_ten_ten(plan):
    selected = plan.selected.sum().item()
    masked = (plan.to_mask & plan.selected).sum().item() / selected
    random = (plan.to_random & plan.selected).sum().item() / selected
    kept = plan.kept.sum().item() / selected
    assert abs(masked - 0.8) <= 0.02, masked
    assert abs(random - 0.1) <= 0.02, random
    assert abs(kept - 0.1) <= 0.02, kept
    # the three outcomes partition the selection
    assert not (plan.to_mask & plan.to_random).any()
    assert not (plan.to_mask & ~plan.selected).any()
    assert not (plan.to_random & ~plan.selected).any()
    assert masked + random + kept == pytest.approx(1.0)


def test_rates_follow_the_arguments(batch):
    plan = _plan(batch, seed=5, mlm_probability=0.3, mask_replace_prob=0.5, random_replace_prob=0.3)
    selected = plan.selected.sum().item()
    assert abs(selected / plan.eligible.sum().item() - 0.3) <= 0.01
    assert abs(plan.to_mask.sum().item() / selected - 0.5) <= 0.02
    assert abs(plan.to_random.sum().item() / selected - 0.3) <= 0.02
    assert abs(plan.kept.sum().item() / selected - 0.2) <= 0.02
    everything = _plan(batch, seed=5, mlm_probability=1.0)
    assert torch.equal(everything.selected, everything.eligible)
    nothing = _plan(batch, seed=5, mlm_probability=0.0)
    assert not nothing.selected.any()


def test_random_replacements_are_never_special_ids(plan):
    chosen = plan.random_ids[plan.to_random]
    assert chosen.numel() > 100
    assert not torch.isin(chosen, torch.tensor(SPECIAL_IDS)).any()
    assert ((chosen >= 0) & (chosen < VOCAB)).all()
    # spread over the vocabulary, not one id
    assert chosen.unique().numel() > chosen.numel() * 0.9


# what the masked inputs and labels hold -----------------------------------------------------------
def test_never_selects_special_padding_or_flagged_positions(batch, plan):
    ids = batch["input_ids"]
    assert not (plan.selected & torch.isin(ids, torch.tensor(SPECIAL_IDS))).any()
    assert not (plan.selected & (batch["attention_mask"] == 0)).any()
    assert not (plan.selected & (batch["special_tokens_mask"] == 1)).any()


def test_apply_masking_labels_and_inputs(batch, plan):
    ids = batch["input_ids"]
    masked, labels = P.apply_masking(ids, plan, MASK)
    assert torch.equal(labels == -100, ~plan.selected)
    assert torch.equal(labels[plan.selected], ids[plan.selected])
    assert (masked[plan.to_mask] == MASK).all()
    assert torch.equal(masked[plan.to_random], plan.random_ids[plan.to_random])
    unchanged = ~plan.to_mask & ~plan.to_random
    assert torch.equal(masked[unchanged], ids[unchanged])
    # special ids, padding and flagged positions come through untouched
    assert torch.equal(masked[~plan.eligible], ids[~plan.eligible])
    assert masked.dtype == ids.dtype and labels.dtype == ids.dtype


def test_custom_ignore_index(batch, plan):
    _, labels = P.apply_masking(batch["input_ids"], plan, MASK, ignore_index=-1)
    assert torch.equal(labels == -1, ~plan.selected)


def test_create_masked_lm_inputs_agrees_with_sample_then_apply(batch):
    expected = P.apply_masking(batch["input_ids"], _plan(batch, seed=99), MASK)
    got = _create(batch, seed=99)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    # the same through an explicit generator
    expected = P.apply_masking(batch["input_ids"], _plan(batch, generator=torch.Generator().manual_seed(7)), MASK)
    got = _create(batch, generator=torch.Generator().manual_seed(7))
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_create_masked_lm_inputs_never_selects_literal_mask_ids_even_if_not_listed():
    ids = torch.tensor([[1, 5, 3, 7, 3, 9, 2]] * 4)
    masked, labels = P.create_masked_lm_inputs(ids, vocab_size=50, mask_token_id=3, special_token_ids=(1, 2),
                                               mlm_probability=1.0, mask_replace_prob=0.0, random_replace_prob=1.0,
                                               seed=0)
    assert (labels[:, [0, 2, 4, 6]] == -100).all()
    assert (labels[:, [1, 3, 5]] == ids[:, [1, 3, 5]]).all()
    # random replacements avoid the mask id and the listed specials
    assert not torch.isin(masked[:, [1, 3, 5]], torch.tensor([1, 2, 3])).any()


def test_model_method_treats_the_pad_id_as_special():
    model = BERTForMaskedLM(tiny_config(vocab_size=60, hidden_size=8, num_attention_heads=2, num_hidden_layers=1,
                                        intermediate_size=16, max_position_embeddings=16, pad_token_id=0))
    ids = torch.tensor([[1, 5, 6, 7, 2, 0, 0]] * 3)
    masked, labels = model.create_masked_lm_inputs(ids, mask_token_id=4, special_token_ids=(1, 2),
                                                   mlm_probability=1.0, seed=3)
    assert (labels[:, [0, 4, 5, 6]] == -100).all()
    assert (labels[:, 1:4] == ids[:, 1:4]).all()
    assert torch.equal(masked[:, [0, 4, 5, 6]], ids[:, [0, 4, 5, 6]])


# reproducibility -------------------------------------------------------------------------------------
def test_same_seed_same_output_different_seed_different(batch):
    first, second, other = _create(batch, seed=11), _create(batch, seed=11), _create(batch, seed=12)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    assert not torch.equal(first[1], other[1])
    assert not torch.equal(first[0], other[0])
    a, b = _plan(batch, seed=11), _plan(batch, seed=11)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_generator_state_advances_between_calls(batch):
    generator = torch.Generator().manual_seed(21)
    first, second = _create(batch, generator=generator), _create(batch, generator=generator)
    assert not torch.equal(first[1], second[1])


def test_inputs_are_not_modified(batch):
    before = {k: v.clone() for k, v in batch.items()}
    _create(batch, seed=2)
    for key, value in batch.items():
        assert torch.equal(value, before[key]), key


# errors ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, name", [
    ({"mlm_probability": -0.1}, "mlm_probability"),
    ({"mlm_probability": 1.5}, "mlm_probability"),
    ({"mask_replace_prob": 1.2}, "mask_replace_prob"),
    ({"mask_replace_prob": -0.5}, "mask_replace_prob"),
    ({"random_replace_prob": -0.1}, "random_replace_prob"),
    ({"random_replace_prob": 2.0}, "random_replace_prob"),
    ({"mask_replace_prob": 0.7, "random_replace_prob": 0.5}, "mask_replace_prob \\+ random_replace_prob"),
])
def test_invalid_probabilities_raise_naming_the_argument(kwargs, name):
    ids = torch.tensor([[101, 5, 6, 102]])
    with pytest.raises(ValueError, match=name):
        P.sample_masking(ids, vocab_size=200, **kwargs)
    with pytest.raises(ValueError, match=name):
        P.create_masked_lm_inputs(ids, vocab_size=200, mask_token_id=103, **kwargs)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="input_ids"):
        P.sample_masking(torch.tensor([1, 2, 3]), vocab_size=10)
    with pytest.raises(ValueError, match="attention_mask"):
        P.sample_masking(torch.tensor([[1, 2, 3]]), vocab_size=10, attention_mask=torch.ones(1, 4))
    with pytest.raises(ValueError, match="special_tokens_mask"):
        P.sample_masking(torch.tensor([[1, 2, 3]]), vocab_size=10, special_tokens_mask=torch.zeros(2, 3))


# property test ---------------------------------------------------------------------------------------
@st.composite
def masking_cases(draw):
    batch = draw(st.integers(1, 4))
    seq_len = draw(st.integers(1, 16))
    vocab_size = draw(st.integers(8, 40))
    specials = draw(st.lists(st.integers(0, vocab_size - 1), min_size=1, max_size=4, unique=True))
    mask_id = specials[0]
    mlm_probability = draw(st.floats(0.0, 1.0))
    mask_replace_prob = draw(st.floats(0.0, 1.0))
    random_replace_prob = draw(st.floats(0.0, 1.0 - mask_replace_prob))
    seed = draw(st.integers(0, 2**31 - 1))
    with_padding = draw(st.booleans())
    return batch, seq_len, vocab_size, specials, mask_id, mlm_probability, mask_replace_prob, \
        random_replace_prob, seed, with_padding


@settings(max_examples=40, deadline=None)
@given(masking_cases())
def test_labels_and_masked_ids_are_consistent(case):
    (batch, seq_len, vocab_size, specials, mask_id, mlm_probability, mask_replace_prob, random_replace_prob,
     seed, with_padding) = case
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (batch, seq_len), generator=g)
    attention_mask = (torch.rand(batch, seq_len, generator=g) < 0.8).long() if with_padding else None
    kwargs = dict(vocab_size=vocab_size, special_token_ids=specials, attention_mask=attention_mask,
                  mlm_probability=mlm_probability, mask_replace_prob=mask_replace_prob,
                  random_replace_prob=random_replace_prob, seed=seed)
    plan = P.sample_masking(ids, **kwargs)
    masked, labels = P.apply_masking(ids, plan, mask_id)
    special = torch.isin(ids, torch.tensor(specials))

    assert masked.shape == labels.shape == ids.shape
    assert not (plan.selected & special).any()
    if attention_mask is not None:
        assert not (plan.selected & (attention_mask == 0)).any()
    assert torch.equal(labels, torch.where(plan.selected, ids, torch.full_like(ids, -100)))
    # unlabelled positions are unchanged; labelled ones are [MASK], a random non-special id, or the original
    assert torch.equal(masked[labels == -100], ids[labels == -100])
    assert (masked[plan.to_mask] == mask_id).all()
    randoms = masked[plan.to_random]
    assert not torch.isin(randoms, torch.tensor(specials)).any()
    assert ((randoms >= 0) & (randoms < vocab_size)).all()
    assert torch.equal(masked[plan.kept], ids[plan.kept])
    if mlm_probability == 0.0:
        assert (labels == -100).all()
    if mlm_probability == 1.0:
        assert torch.equal(plan.selected, plan.eligible)
    # one call gives the same
    got = P.create_masked_lm_inputs(ids, mask_token_id=mask_id, **kwargs)
    assert torch.equal(got[0], masked) and torch.equal(got[1], labels)
