"""Attention statistics from queries and keys (kernels/statistics.py, avx2.c's bvl_attention_statistics) against a
float64 reference that forms the probabilities, on every edge of a text's length and mask; and where they run."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab import kernels
from bertviz_lab.kernels import avx2, build
from bertviz_lab.kernels.head_statistics import STATISTIC_NAMES

needs_kernel = pytest.mark.usefixtures("avx2_kernels")


def reference(q: torch.Tensor, k: torch.Tensor, valid: torch.Tensor, kinds: torch.Tensor,
              scale: float) -> torch.Tensor:
    """(B, H, 7) in float64, query by query from the probabilities, in the registry's order (so the kernel's
    columns are checked against the names build.py compares at load)."""
    scores = (q.double() @ k.double().transpose(-2, -1)) * scale
    p = scores.masked_fill(valid[:, None, None, :] == 0, float("-inf")).softmax(-1)  # (B, H, S, S)
    p = torch.where(valid[:, None, :, None] > 0, p, 0.0)  # padding queries (NaN rows for an empty text) count 0
    S = p.shape[-1]
    eye, below = torch.eye(S, dtype=torch.float64), torch.ones(max(S - 1, 0), dtype=torch.float64)
    by_name = {
        "entropy": torch.special.entr(p).sum(-1),
        "cls": (p * kinds[:, None, None, :, 0].double()).sum(-1),
        "sep": (p * kinds[:, None, None, :, 1].double()).sum(-1),
        "self": (p * eye).sum(-1),
        "prev": (p * torch.diag(below, -1)).sum(-1),  # p[i, i-1]
        "next": (p * torch.diag(below, 1)).sum(-1),  # p[i, i+1]
        "punct": (p * kinds[:, None, None, :, 2].double()).sum(-1),
    }
    per_query = torch.stack([by_name[name] for name in STATISTIC_NAMES], dim=-1)  # (B, H, S, 7)
    return (per_query * valid[:, None, :, None].double()).sum(2)


def inputs(lengths: list[int], S: int, H: int = 3, D: int = 32, seed: int = 0, spread: float = 1.0):
    """q and k as the model's views of its fused projection (rows 3 * H * D apart), valid 1 on each text's first
    `lengths` tokens, random key kinds."""
    generator = torch.Generator().manual_seed(seed)
    B = len(lengths)
    qkv = torch.randn(B, S, 3 * H * D, generator=generator) * spread
    q, k, _ = qkv.view(B, S, 3 * H, D).transpose(1, 2).chunk(3, dim=1)
    valid = (torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]).float()
    kinds = (torch.rand(B, S, 3, generator=generator) < 0.3).float()
    return q, k, valid, kinds


def check(ours: torch.Tensor, exact: torch.Tensor, valid: torch.Tensor, per_query: float = 2e-6) -> None:
    """Each sum within `per_query` of float64 for every query it adds up."""
    assert ours.shape == exact.shape
    bound = per_query * valid.sum(1).clamp_min(1)[:, None, None].double()
    assert ((ours.double() - exact).abs() <= bound).all(), (ours.double() - exact).abs().max()


@needs_kernel
@pytest.mark.parametrize("S", [1, 7, 8, 9, 16, 17, 47, 48, 49, 100, 130])
def test_kernel_matches_float64_at_every_length(S):
    lengths = sorted({1, max(1, S // 2), S - 1 or 1, S})
    q, k, valid, kinds = inputs(lengths, S, seed=S)
    ours = avx2.attention_statistics(q, k, valid, kinds, 0.25)
    assert ours.dtype == torch.float64
    check(ours, reference(q, k, valid, kinds, 0.25), valid)


@needs_kernel
def test_kernel_masks_keys_anywhere_and_skips_empty_texts():
    q, k, valid, kinds = inputs([20, 20, 0], 20, seed=1)
    valid[0, 5:9] = 0  # a hole: neither queries nor keys
    valid[1, :3] = 0  # left padding
    ours = avx2.attention_statistics(q, k, valid, kinds, 0.3)
    check(ours, reference(q, k, valid, kinds, 0.3), valid)
    assert (ours[2] == 0).all()


@needs_kernel
def test_kernel_keeps_peaked_rows_and_weighted_queries_exact():
    q, k, valid, kinds = inputs([60, 33], 60, seed=2, spread=6.0)  # scores over hundreds: near one-hot rows
    valid[0, ::4] = 0.5  # a weight other than 1 scales its query's statistics
    ours = avx2.attention_statistics(q, k, valid, kinds, 1.0)
    exact = reference(q, k, valid, kinds, 1.0)
    check(ours, exact, valid)
    assert exact[..., 0].min() < 0.01 * 60  # the rows are peaked indeed


@needs_kernel
def test_kernel_takes_head_subsets_and_contiguous_tensors():
    q, k, valid, kinds = inputs([13, 40], 40, H=4, D=16, seed=3)
    chosen = [3, 1]
    exact = reference(q[:, chosen], k[:, chosen], valid, kinds, 0.5)
    check(avx2.attention_statistics(q[:, chosen], k[:, chosen], valid, kinds, 0.5), exact, valid)
    check(avx2.attention_statistics(q[:, chosen].contiguous(), k[:, chosen].contiguous(), valid, kinds, 0.5), exact,
          valid)


@needs_kernel
def test_kernel_nan_in_an_attended_score_makes_that_head_nan_and_unread_ones_do_not():
    q, k, valid, kinds = inputs([10, 10, 6], 10, seed=4)
    q[0, 1, 4, 0] = float("nan")  # a real query: every statistic of (text 0, head 1) is NaN
    q[2, 0, 8, 0] = float("nan")  # a padding query: not computed
    k[2, 2, 7, 0] = float("nan")  # a padding key: not read
    ours = avx2.attention_statistics(q, k, valid, kinds, 0.3)
    assert ours[0, 1].isnan().all() and not ours[0, [0, 2]].isnan().any() and not ours[1:].isnan().any()
    q[0, 1, 4, 0], q[2, 0, 8, 0], k[2, 2, 7, 0] = 0.0, 0.0, 0.0
    check(ours[1:], reference(q, k, valid, kinds, 0.3)[1:], valid[1:])


@needs_kernel
@pytest.mark.parametrize("S", [1, 9, 48, 49, 100, 130])
def test_the_attention_pass_gives_the_same_statistics_and_the_same_output(S):
    """bvl_attention's statistics (a block of 48 queries at a time) under BERT's additive padding mask."""
    lengths = sorted({1, max(1, S // 3), S})
    q, k, valid, kinds = inputs(lengths, S, seed=10 + S)
    v = torch.randn(q.shape, generator=torch.Generator().manual_seed(S))
    mask = torch.zeros(len(lengths), 1, 1, S).masked_fill(valid[:, None, None, :] == 0, torch.finfo(torch.float32).min)
    out, ours = avx2.attention_with_statistics(q, k, v, mask, 0.25, valid, kinds)
    assert torch.equal(out, avx2.attention(q, k, v, mask, 0.25))
    check(ours, reference(q, k, valid, kinds, 0.25), valid)
    q[-1, 1, S // 2, 0] = float("nan")  # a real query of the longest text
    nan = avx2.attention_with_statistics(q, k, v, mask, 0.25, valid, kinds)[1][-1, 1].isnan()
    assert nan.tolist() == [True] * 4 + [S > 1] * 2 + [True]  # a lone query has no previous or next key to count


@needs_kernel
def test_kernel_refuses_what_it_cannot_compute():
    q, k, valid, kinds = inputs([5], 5)
    with pytest.raises(ValueError, match="float32 CPU tensors"):
        avx2.attention_statistics(q.double(), k.double(), valid, kinds, 1.0)
    with pytest.raises(ValueError, match="q, k of one shape"):
        avx2.attention_statistics(q, k[..., :4, :], valid, kinds, 1.0)
    with pytest.raises(ValueError, match="do not fit"):
        avx2.attention_statistics(q, k, valid, kinds[..., :2], 1.0)
    with pytest.raises(ValueError, match="do not fit"):  # statistics need self-attention: as many queries as keys
        avx2.attention_with_statistics(q[:, :, :3], k, k, None, 1.0, valid, kinds)


def test_kernel_where_it_runs_and_torch_elsewhere_with_the_same_values(monkeypatch):
    q, k, valid, kinds = inputs([9, 4], 9, seed=5)
    exact = reference(q, k, valid, kinds, 0.4)
    calls = []
    kernel = avx2.attention_statistics
    monkeypatch.setattr(avx2, "attention_statistics", lambda *args: calls.append(args[0].shape) or kernel(*args))
    check(kernels.attention_statistics(q, k, valid, kinds, 0.4), exact, valid)
    assert calls == ([q.shape] if build.library() is not None else [])
    calls.clear()
    with kernels.disabled():
        check(kernels.attention_statistics(q, k, valid, kinds, 0.4), exact, valid)
    check(kernels.attention_statistics(q.double(), k.double(), valid, kinds, 0.4), exact, valid)
    with torch.enable_grad():
        tracked = kernels.attention_statistics(q.clone().requires_grad_(), k, valid, kinds, 0.4)
        assert tracked.requires_grad  # autograd: PyTorch's
    check(tracked.detach(), exact, valid)
    assert calls == []


def test_probability_statistics_equal_the_reference_from_the_probabilities():
    q, k, valid, kinds = inputs([12, 5], 12, seed=6)
    scores = (q @ k.transpose(-2, -1)) * 0.3
    probs = scores.masked_fill(valid[:, None, None, :] == 0, torch.finfo(torch.float32).min).softmax(-1)
    check(kernels.probability_statistics(probs, valid, kinds[:, None]), reference(q, k, valid, kinds, 0.3), valid)
