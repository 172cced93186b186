"""Traced attentions against transformers on the real MiniLM checkpoint, and the attention analysis (head means,
rollout, entropy, [CLS]/[SEP]/self shares) against direct numpy implementations, padding excluded."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import transformers

from bertviz_lab.model import BERT, BERT_Weights, BERTTokenizerFast
from bertviz_lab.trace import (
    attention_rollout,
    attention_shares,
    head_entropy,
    head_mean,
    head_statistics,
    layer_means,
    special_token_masks,
    trace,
)

SENTENCES = ["The cat sat on the mat.", "Attention maps show which words a model looks at when it reads a sentence.",
             "Hello!"]


# real checkpoint ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def minilm_traced():
    """Our MiniLM traced on a padded batch of real sentences, and transformers' eager attentions on the same."""
    path = BERT_Weights.DEFAULT.path
    tokenizer = BERTTokenizerFast.from_pretrained(path)
    encoding = tokenizer(SENTENCES, return_tensors="pt")
    ours = BERT.from_pretrained(path).eval()
    reference = transformers.BertModel.from_pretrained(str(path), attn_implementation="eager").eval()
    with torch.no_grad():
        with trace(ours, hidden_states=True, tokens=encoding, tokenizer=tokenizer) as t:
            ours(**encoding)
        expected = reference(**encoding, output_attentions=True, output_hidden_states=True)
    return t, expected, encoding


def test_traced_attentions_equal_transformers_on_minilm(minilm_traced):
    t, expected, encoding = minilm_traced
    mask = encoding["attention_mask"]
    assert (mask == 0).any(), "the batch must be padded"
    assert len(t.attentions) == len(expected.attentions) == 6
    for ours, theirs in zip(t.attentions, expected.attentions):
        assert ours.shape == theirs.shape == (3, 12, mask.shape[1], mask.shape[1])
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
        torch.testing.assert_close(ours.sum(-1), torch.ones(ours.shape[:-1]), atol=1e-6, rtol=0)
        assert (ours * (mask == 0)[:, None, None, :]).abs().max() == 0  # padded keys get exactly 0
    for ours, theirs in zip(t.hidden_states, expected.hidden_states):
        # fp32 sums in another order (avx2.c's GEMM or oneDNN's here, MKL's in transformers, chosen by the CPU)
        # differ by up to ~3e-5 relative after six layers: 1.1e-4 on a value of 3.5 was seen with avx2.c on AVX-512
        torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)
    assert t.tokens[2][:4] == ["[CLS]", "hello", "!", "[SEP]"] and t.tokens[2][-1] == "[PAD]"


def test_head_statistics_on_minilm_leave_padding_out(minilm_traced):
    t, _, encoding = minilm_traced
    stats = head_statistics(t)
    assert {k: v.shape for k, v in stats.items()} == {k: (6, 3, 12) for k in ("entropy", "cls", "sep", "self")}
    lengths = encoding["attention_mask"].sum(1)
    assert (stats["entropy"] <= torch.log(lengths.float())[None, :, None] + 1e-5).all()  # at most log(#real keys)
    for key in ("cls", "sep", "self"):
        assert ((stats[key] >= 0) & (stats[key] <= 1 + 1e-6)).all()
    assert (stats["cls"] + stats["sep"] <= 1 + 1e-5).all()
    rollout = attention_rollout(t)
    valid = encoding["attention_mask"].bool()
    torch.testing.assert_close(rollout.sum(-1)[valid], torch.ones(int(valid.sum())), atol=1e-5, rtol=0)
    assert rollout[~valid].abs().max() == 0  # padded query rows
    assert rollout.masked_select(~valid[:, None, :]).abs().max() == 0  # padded key columns


# direct implementations --------------------------------------------------------------------------------
def random_attention(batch=3, heads=4, length=7, lengths=(7, 5, 2), seed=0):
    """Row-stochastic attention over real keys, zero on padded keys (as a model produces it), and the mask."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(batch, heads, length, length, generator=generator, dtype=torch.float64) * 2
    mask = torch.zeros(batch, length, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    scores = scores.masked_fill((mask == 0)[:, None, None, :], -math.inf)
    return torch.softmax(scores, -1).float(), mask


def rollout_numpy(attentions, mask, residual_weight=0.5):
    """Abnar & Zuidema, one sentence at a time on its real tokens only, with plain numpy loops."""
    attentions = [a.double().numpy() for a in attentions]
    B, _, T, _ = attentions[0].shape
    out = np.zeros((B, T, T))
    for b in range(B):
        n = int(mask[b].sum())
        result = np.eye(n)
        for a in attentions:
            mean = a[b, :, :n, :n].mean(axis=0)
            layer = residual_weight * np.eye(n) + (1 - residual_weight) * mean
            layer = layer / layer.sum(axis=1, keepdims=True)
            result = layer @ result
        out[b, :n, :n] = result
    return out


def test_rollout_matches_a_direct_numpy_implementation():
    layers = [random_attention(seed=s)[0] for s in range(4)]
    _, mask = random_attention()
    ours = attention_rollout(layers, mask)
    np.testing.assert_allclose(ours.numpy(), rollout_numpy(layers, mask), atol=1e-6)
    np.testing.assert_allclose(attention_rollout(layers, mask, residual_weight=0.2).numpy(),
                               rollout_numpy(layers, mask, 0.2), atol=1e-6)
    unmasked = attention_rollout([random_attention(lengths=(7, 7, 7), seed=s)[0] for s in range(2)])
    torch.testing.assert_close(unmasked.sum(-1), torch.ones(3, 7))
    with pytest.raises(ValueError, match="residual_weight"):
        attention_rollout(layers, mask, residual_weight=1.5)
    with pytest.raises(ValueError, match="square"):
        attention_rollout([torch.rand(1, 2, 3, 5)])
    with pytest.raises(TypeError, match="Trace or a non-empty list"):
        attention_rollout(layers[0])


def test_rollout_of_a_trace_uses_its_mask(tiny_bert, batch):
    ids, mask, types = batch
    with torch.no_grad(), trace(tiny_bert) as t:
        tiny_bert(ids, mask, types)
    np.testing.assert_allclose(attention_rollout(t).numpy(), rollout_numpy(t.attentions, mask), atol=1e-6)
    means = layer_means(t)
    assert len(means) == 3 and means[0].shape == (3, 8, 8)
    torch.testing.assert_close(means[1], t.attentions[1].mean(1))
    torch.testing.assert_close(head_mean(t.attentions[1]), t.attentions[1].mean(1))


def test_entropy_matches_a_direct_computation_over_real_tokens():
    attention, mask = random_attention()
    ours = head_entropy(attention, mask)
    p = attention.double().numpy()
    for b in range(3):
        n = int(mask[b].sum())
        for h in range(4):
            rows = [-sum(x * math.log(x) for x in p[b, h, q, :n] if x > 0) for q in range(n)]
            assert ours[b, h].item() == pytest.approx(sum(rows) / n, abs=1e-6)
    uniform = torch.full((1, 1, 4, 4), 0.25)
    assert head_entropy(uniform).item() == pytest.approx(math.log(4))
    with pytest.raises(ValueError, match="4D"):
        head_entropy(torch.rand(4, 4))
    with pytest.raises(ValueError, match="attention_mask must be"):
        head_entropy(uniform, torch.ones(1, 3))


def test_cls_sep_and_self_shares_match_a_direct_computation():
    attention, mask = random_attention()
    ids = torch.randint(5, 50, (3, 7))
    for row, n in enumerate(mask.sum(1).tolist()):
        ids[row, 0], ids[row, n - 1], ids[row, n:] = 101, 102, 0
    is_cls, is_sep = special_token_masks(ids)
    ours = attention_shares(attention, is_cls, is_sep, mask)
    p = attention.double().numpy()
    for b in range(3):
        n = int(mask[b].sum())
        for h in range(4):
            cls = np.mean([sum(p[b, h, q, k] for k in range(n) if ids[b, k] == 101) for q in range(n)])
            sep = np.mean([sum(p[b, h, q, k] for k in range(n) if ids[b, k] == 102) for q in range(n)])
            own = np.mean([p[b, h, q, q] for q in range(n)])
            assert ours["cls"][b, h].item() == pytest.approx(cls, abs=1e-6)
            assert ours["sep"][b, h].item() == pytest.approx(sep, abs=1e-6)
            assert ours["self"][b, h].item() == pytest.approx(own, abs=1e-6)
    on_cls = torch.zeros(1, 1, 3, 3)
    on_cls[..., 0] = 1
    shares = attention_shares(on_cls, *special_token_masks(tokens=[["[CLS]", "hi", "[SEP]"]]))
    assert (shares["cls"].item(), shares["sep"].item(), shares["self"].item()) == pytest.approx((1.0, 0.0, 1 / 3))
    with pytest.raises(ValueError, match="is_cls and is_sep"):
        attention_shares(on_cls, torch.zeros(1, 2, dtype=torch.bool), torch.zeros(1, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="input_ids or tokens"):
        special_token_masks()


def test_head_statistics_need_attentions(tiny_bert, batch):
    with trace(tiny_bert, attentions=False) as t:
        tiny_bert(batch[0])
    with pytest.raises(ValueError, match="attentions=True"):
        head_statistics(t)
