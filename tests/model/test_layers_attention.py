"""The attention written out in layers.py is the reference: every backend this machine can run gives the same
outputs on the same inputs (within 1e-5), in a model and called directly, and the same per-head statistics beside
them as the probabilities of the written-out attention reduce to."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_config

from bertviz_lab import kernels
from bertviz_lab.model import BERT

# two heads of 32: a head size the CPU kernel takes too
SIZES = dict(hidden_size=64, num_attention_heads=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def padded_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 100, (3, 12), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 7:], mask[2, 3:] = 0, 0
    return ids, mask


def run(model: BERT, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(output unwatched, each layer's probabilities from a cache) under inference."""
    with torch.inference_mode():
        output = model(ids, attention_mask=mask).last_hidden_state
        _, cache = model.run_with_cache(ids, attention_mask=mask, names_filter=lambda name: name.endswith("probs"))
    return output, list(cache.values())


@pytest.mark.parametrize("name", kernels.attention_backends())
def test_every_backend_equals_the_written_out_attention(name):
    torch.manual_seed(0)
    model = BERT(tiny_config(**SIZES)).eval()
    ids, mask = padded_inputs()
    with kernels.override(model, attention="eager"):
        assert model.encoder.layer[0].attention.self.attention_backend is None
        reference, reference_probs = run(model, ids, mask)
    with kernels.override(model, attention=name):
        given = model.encoder.layer[0].attention.self.attention_backend
        assert (given.name if given is not None else "eager") == name
        output, probs = run(model, ids, mask)
    torch.testing.assert_close(output, reference, rtol=0, atol=1e-5)
    assert len(probs) == len(reference_probs) == 2
    for got, want in zip(probs, reference_probs):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", [n for n in kernels.attention_backends() if n != "eager"])
def test_a_backend_called_alone_equals_the_layers_math(name):
    torch.manual_seed(0)
    layer = BERT(tiny_config(**SIZES)).eval().encoder.layer[0].attention.self
    q, k, v = (torch.randn(2, 2, 9, 32) for _ in range(3))
    mask = torch.zeros(2, 1, 1, 9)
    mask[1, ..., 5:] = torch.finfo(torch.float32).min
    valid = (mask[:, 0, 0] == 0).float()  # (B, S): the keys the mask lets through
    kinds = (torch.rand(2, 9, 3, generator=torch.Generator().manual_seed(1)) > 0.6).float()
    with torch.inference_mode(), kernels.override(attention=name):
        backend = kernels.attention.backend(name)
        want = layer.attention(q, k, v, mask, 0.0)
        got = backend(q, k, v, mask, layer.scale)
        out, statistics = backend.with_statistics(q, k, v, mask, layer.scale, valid, kinds)
        alone, only = backend.with_statistics(q, k, v, mask, layer.scale, valid, kinds, output=False)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-5)
    probs = (q.double() @ k.double().transpose(-2, -1) * layer.scale + mask.double()).softmax(-1)
    reference = kernels.probability_statistics(probs, valid, kinds[:, None]).double()
    assert statistics.shape == (2, 2, 7) and alone is None
    torch.testing.assert_close(statistics.double(), reference, rtol=0, atol=1e-5)
    torch.testing.assert_close(only.double(), reference, rtol=0, atol=1e-5)


def test_a_hook_that_replaces_the_probabilities_is_obeyed_on_every_backend():
    torch.manual_seed(0)
    model = BERT(tiny_config(**SIZES, num_hidden_layers=1)).eval()
    ids, _ = padded_inputs()
    uniform = ("encoder.layer.0.attention.self.probs", lambda probs, point: torch.full_like(probs, 1 / probs.shape[-1]))
    for name in kernels.attention_backends():
        with kernels.override(model, attention=name), torch.inference_mode(), model.hooks([uniform]):
            _, cache = model.run_with_cache(ids, names_filter=["encoder.layer.0.attention.self.v",
                                                               "encoder.layer.0.attention.self.context"])
        v, context = cache.values()
        torch.testing.assert_close(context, v.mean(dim=2, keepdim=True).expand_as(context), rtol=0, atol=1e-5)
