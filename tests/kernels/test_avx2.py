"""The AVX2 kernels (avx2.c) against float64 references on every kind of edge, and how they build or decline."""

from __future__ import annotations

import functools
import logging
import re

import pytest
import torch
import torch.nn.functional as F

from bertviz_lab.kernels import avx2, build

needs_kernel = pytest.mark.usefixtures("avx2_kernels")


def _check(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    """Every output within the textbook rounding bound of a K-term fp32 sum; on long sums, errors on average no
    larger than PyTorch's own (MKL's) plus a fifth."""
    ours = avx2.linear(x, avx2.pack(weight), bias, weight.shape[0])
    exact = F.linear(x.double(), weight.double(), None if bias is None else bias.double())
    assert ours.shape == exact.shape and ours.dtype == torch.float32
    magnitude = F.linear(x.double().abs(), weight.double().abs(), None if bias is None else bias.double().abs())
    steps = x.shape[-1] + 1
    assert ((ours - exact).abs() <= steps * 2.0 ** -24 * magnitude + 1e-30).all()
    if x.shape[-1] >= 128:
        theirs = F.linear(x, weight, bias)
        assert (ours - exact).abs().mean() <= 1.2 * (theirs - exact).abs().mean()


@needs_kernel
@pytest.mark.parametrize("rows", [1, 5, 6, 7, 143, 144, 145, 301])
@pytest.mark.parametrize("out_features", [1, 15, 16, 17, 40])
def test_every_tile_edge_matches_float64(rows, out_features):
    generator = torch.Generator().manual_seed(rows * 100 + out_features)
    x = torch.randn(rows, 33, generator=generator)
    weight = torch.randn(out_features, 33, generator=generator)
    _check(x, weight, torch.randn(out_features, generator=generator))


@needs_kernel
@pytest.mark.parametrize("in_features", [1, 7, 128, 129, 384, 385, 769, 3072])
def test_k_blocks_and_chunks_match_float64_with_and_without_bias(in_features):
    generator = torch.Generator().manual_seed(in_features)
    x = torch.randn(3, 20, in_features, generator=generator)
    weight = torch.randn(50, in_features, generator=generator) / in_features ** 0.5
    _check(x, weight, torch.randn(50, generator=generator))
    _check(x, weight, None)


@needs_kernel
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_large_products_cut_into_tasks_match_float64(threads):
    """Three row blocks (the last partial) x 13 panels (the last partial) x 3 K blocks: one-panel tasks, taken in
    any order by any thread, each thread packing a row block once for every task it runs on it."""
    generator = torch.Generator().manual_seed(threads)
    x = torch.randn(301, 800, generator=generator)
    weight = torch.randn(200, 800, generator=generator) / 800 ** 0.5
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _check(x, weight, torch.randn(200, generator=generator))
    finally:
        torch.set_num_threads(before)


@needs_kernel
def test_empty_products_give_the_bias_or_nothing():
    bias = torch.randn(40)
    no_inputs = avx2.linear(torch.randn(2, 5, 0), avx2.pack(torch.randn(40, 0)), bias, 40)
    assert torch.equal(no_inputs, bias.expand(2, 5, 40))
    assert torch.equal(avx2.linear(torch.randn(5, 0), avx2.pack(torch.randn(40, 0)), bias, 40, gelu=True),
                       F.gelu(bias).expand(5, 40))
    assert avx2.linear(torch.randn(0, 8), avx2.pack(torch.randn(40, 8)), None, 40).shape == (0, 40)


@needs_kernel
def test_strided_inputs_and_weights_and_one_thread():
    generator = torch.Generator().manual_seed(0)
    wide = torch.randn(4, 30, 100, generator=generator)
    _check(wide[:, :, :64], torch.randn(48, 64, generator=generator), None)  # rows 100 floats apart
    _check(torch.randn(30, 4, 64, generator=generator).transpose(0, 1),  # not viewable as rows: copied
           torch.randn(64, 48, generator=generator).t(), torch.randn(48, generator=generator))  # transposed weight
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _check(torch.randn(200, 96, generator=generator), torch.randn(80, 96, generator=generator), None)
    finally:
        torch.set_num_threads(threads)


@needs_kernel
def test_a_failing_compiler_is_reported_and_leaves_no_file(tmp_path, monkeypatch):
    failing = tmp_path / "failing-cc"  # answers --version like a compiler, then fails every build
    failing.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "failing-cc 1.0" && exit 0\necho nope >&2\nexit 1\n')
    failing.chmod(0o755)
    monkeypatch.setenv("CC", str(failing))
    with pytest.raises(RuntimeError, match="building the AVX2 kernels failed .*\nnope"):
        build.load(tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_missing_compiler_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler")
    assert "compiler" not in (build.unsupported_reason() or "")  # a build in the cache may still run
    reason = build.unsupported_reason() or "no C compiler (no-such-compiler) to build them"
    with pytest.raises(RuntimeError, match=re.escape(f"the AVX2 kernels cannot run here: {reason}")):
        build.load(tmp_path)


@needs_kernel
def test_builds_once_into_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTVIZ_LAB_CACHE", str(tmp_path))
    assert build.cache_dir() == tmp_path
    lib = build.load()
    built = list(tmp_path.glob("avx2-*.so"))
    assert len(built) == 1 and lib.bvl_abi_version() == build.ABI_VERSION
    monkeypatch.setenv("CC", "false")  # a second load must not compile again
    assert build.load().bvl_abi_version() == build.ABI_VERSION


def test_library_answers_none_and_logs_why_when_it_cannot_build(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("CC", "no-such-compiler")
    monkeypatch.setenv("BERTVIZ_LAB_CACHE", str(tmp_path))  # empty: no build to fall back on
    monkeypatch.delenv("BERTVIZ_LAB_CPU_GEMM", raising=False)
    # a library() of this test's own: the process's stays loaded for the other tests
    monkeypatch.setattr(build, "library", functools.cache(build.library.__wrapped__))
    with caplog.at_level(logging.INFO, logger="bertviz_lab.kernels.build"):
        assert build.library() is None
    assert (build.unsupported_reason() or "no C compiler (no-such-compiler)") in caplog.text


def _qkv(batch: int, heads: int, queries: int, keys: int, head_size: int, seed: int):
    """q, k, v as the layers hand them over: (B, H, T|S, D) views into fused projections."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, queries, heads, head_size, generator=generator).transpose(1, 2)
    kv = torch.randn(batch, keys, 2, heads, head_size, generator=generator)
    return q, kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)


def _masks(batch: int, heads: int, queries: int, keys: int) -> dict:
    lowest = torch.finfo(torch.float32).min
    padding = torch.zeros(batch, 1, 1, keys)
    padding[-1, ..., keys // 2 + 1:] = lowest
    causal = torch.full((queries, keys), lowest).triu(1 + keys - queries)[None, None]
    return {"none": None, "padding": padding, "causal": causal,
            "per-head": torch.randn(batch, heads, queries, keys, generator=torch.Generator().manual_seed(3))}


@needs_kernel
@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "per-head"])
@pytest.mark.parametrize("shape", [(1, 12, 128, 128, 32), (2, 4, 37, 37, 64), (3, 2, 7, 300, 16), (1, 1, 1, 1, 16),
                                   (2, 3, 50, 61, 48)])
def test_attention_matches_float64_as_closely_as_sdpa(shape, mask_kind):
    batch, heads, queries, keys, head_size = shape
    q, k, v = _qkv(batch, heads, queries, keys, head_size, seed=sum(shape))
    mask = _masks(batch, heads, queries, keys)[mask_kind]
    ours = avx2.attention(q, k, v, mask, head_size ** -0.5)
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                           attn_mask=None if mask is None else mask.double())
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert ours.shape == (batch, queries, heads * head_size)
    exact, sdpa = (x.transpose(1, 2).reshape(ours.shape) for x in (exact, sdpa))
    assert (ours - exact).abs().max() <= 2 * (sdpa - exact).abs().max() + 1e-7


@needs_kernel
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_attention_tasks_shared_by_any_number_of_threads_match_float64(threads):
    """2 x 4 heads x 4 query blocks: 32 tasks dealt in shares, the last ones taken by whichever thread is free."""
    q, k, v = _qkv(2, 4, 150, 150, 32, seed=threads)
    mask = _masks(2, 4, 150, 150)["padding"]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ours = avx2.attention(q, k, v, mask, 32 ** -0.5)
    finally:
        torch.set_num_threads(before)
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask.double())
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    exact, sdpa = (x.transpose(1, 2).reshape(ours.shape) for x in (exact, sdpa))
    assert (ours - exact).abs().max() <= 2 * (sdpa - exact).abs().max() + 1e-7


@needs_kernel
def test_gelu_epilogue_matches_float64_gelu_everywhere():
    x = torch.linspace(-12, 12, 240_001).reshape(-1, 1)
    ones = torch.ones(1, 1)  # a 1 -> 1 linear layer, so the output is GELU(x) itself
    ours = avx2.linear(x, avx2.pack(ones), None, 1, gelu=True)
    exact, theirs = F.gelu(x.double()), F.gelu(x)
    assert (ours - exact).abs().max() <= 1.5 * (theirs - exact).abs().max()
    visible = exact.abs() > 1e-3
    assert ((ours - exact).abs() / exact.abs())[visible].max() <= 2e-6  # no cancellation on the negative side
    special = avx2.linear(torch.tensor([[float("nan")], [float("inf")], [-float("inf")], [0.0]]),
                              avx2.pack(ones), None, 1, gelu=True)
    assert special[0].isnan() and special[1] == float("inf") and special[3] == 0


@needs_kernel
def test_linear_with_gelu_matches_float64():
    generator = torch.Generator().manual_seed(5)
    x, weight = torch.randn(3, 100, 384, generator=generator), torch.randn(1536, 384, generator=generator) / 20
    bias = torch.randn(1536, generator=generator)
    ours = avx2.linear(x, avx2.pack(weight), bias, 1536, gelu=True)
    exact = F.gelu(F.linear(x.double(), weight.double(), bias.double()))
    theirs = F.gelu(F.linear(x, weight, bias))
    assert (ours - exact).abs().max() <= 2 * (theirs - exact).abs().max()


@needs_kernel
@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "per-head"])
def test_attention_probabilities_match_float64_softmax(mask_kind):
    batch, heads, queries, keys, head_size = 2, 3, 50, 61, 32
    q, k, _ = _qkv(batch, heads, queries, keys, head_size, seed=7)
    mask = _masks(batch, heads, queries, keys)[mask_kind]
    ours = avx2.attention_probabilities(q, k, mask, head_size ** -0.5)
    scores = q.double() @ k.double().transpose(-2, -1) * head_size ** -0.5
    exact = torch.softmax(scores if mask is None else scores + mask.double(), dim=-1)
    assert ours.shape == (batch, heads, queries, keys)
    assert (ours - exact).abs().max() <= 1e-6
    torch.testing.assert_close(ours.sum(-1), torch.ones(batch, heads, queries), rtol=0, atol=1e-6)


@needs_kernel
def test_attention_refuses_what_it_cannot_compute():
    q, k, v = _qkv(1, 2, 5, 5, 16, seed=0)
    with pytest.raises(ValueError, match="head size that is a multiple of 16, got .* and head size 8"):
        avx2.attention(q[..., :8], k[..., :8], v[..., :8], None, 1.0)
    with pytest.raises(ValueError, match="float32 CPU tensors"):
        avx2.attention(q.double(), k.double(), v.double(), None, 1.0)
    with pytest.raises(ValueError, match="do not fit"):
        avx2.attention(q, k[:, :1], v, None, 1.0)


@needs_kernel
@pytest.mark.parametrize("keys", [1, 7, 8, 9, 61, 128])
def test_entropy_matches_float64_on_softmax_rows_with_zeros_and_tiny_weights(keys):
    generator = torch.Generator().manual_seed(keys)
    scores = torch.randn(3, 4, 5, keys, generator=generator) * 6
    scores[..., ::3] = float("-inf")  # exact zeros, as padding keys get
    scores[..., 0] = 0.0  # every row keeps one key
    p = torch.softmax(scores, dim=-1)
    p[0, 0, 0, -1] = 1e-39  # a subnormal weight counts as 0
    exact = torch.special.entr(p.double()).sum(-1)
    ours = avx2.entropy(p)
    assert ours.shape == (3, 4, 5) and ours.dtype == torch.float32
    assert (ours - exact).abs().max() <= 1e-6


@needs_kernel
def test_entropy_of_every_float_magnitude_is_within_two_ulps_of_float64():
    x = torch.cat([torch.logspace(-37.9, 0, 100_001), torch.tensor([0.5, 1.0, 0.0])])
    exact = torch.special.entr(x.double())
    ours = avx2.entropy(x[:, None])
    relative = ((ours.double() - exact).abs() / exact.clamp_min(1e-300))[exact > 0]
    assert relative.max() <= 2.5e-7
    assert ours[-2] == 0 and ours[-1] == 0  # 1 ln 1 and 0 ln 0
    nan = avx2.entropy(torch.tensor([[0.5, float("nan"), 0.5], [0.5, 0.5, 0.0]]))
    assert torch.isnan(nan[0]) and nan[1] == pytest.approx(0.693147, abs=1e-6)  # NaN propagates, as in entr


@needs_kernel
def test_entropy_reads_strided_and_transposed_probabilities():
    p = torch.softmax(torch.randn(2, 3, 40, 40, generator=torch.Generator().manual_seed(3)), dim=-1)
    columns = p.transpose(-2, -1).contiguous().transpose(-2, -1)  # same values, last dimension strided
    exact = torch.special.entr(p.double()).sum(-1)
    for view in (columns, p[:, :, ::2], p[..., :33]):
        want = exact if view is columns else torch.special.entr(view.double()).sum(-1)
        assert (avx2.entropy(view) - want).abs().max() <= 1e-6
