"""What the layers do with the backends they are given, checked by running them: the forward equals BERT's math
written out here from the weights, each layer reaches each backend through one call, a backend that stands aside
leaves the plain path, and a watched `probs` point makes its layer write the attention out."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from tiny_models import tiny_config

from bertviz_lab.model import BERT

ATTRIBUTES = ("attention_backend", "linear_backend", "gelu_backend", "add_layer_norm_backend")


def written_out(model: BERT, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """BERT's encoder output from its weights, with nothing but tensor arithmetic."""
    emb = model.embeddings
    T = ids.shape[1]
    x = emb.word_embeddings.weight[ids] + emb.position_embeddings.weight[:T] + emb.token_type_embeddings.weight[0]
    x = F.layer_norm(x, x.shape[-1:], emb.LayerNorm.weight, emb.LayerNorm.bias, emb.LayerNorm.eps)
    additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    for layer in model.encoder.layer:
        attention = layer.attention
        B, _, C = x.shape
        nh = attention.self.num_heads
        qkv = x @ attention.self.qkv.weight.T + attention.self.qkv.bias
        q, k, v = (part.view(B, T, nh, C // nh).transpose(1, 2) for part in qkv.split(C, dim=-1))
        probs = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(C // nh) + additive, dim=-1)
        context = (probs @ v).transpose(1, 2).reshape(B, T, C)
        out = attention.output
        x = F.layer_norm(context @ out.dense.weight.T + out.dense.bias + x, (C,), out.LayerNorm.weight,
                         out.LayerNorm.bias, out.LayerNorm.eps)
        hidden = F.gelu(x @ layer.intermediate.dense.weight.T + layer.intermediate.dense.bias)
        out = layer.output
        x = F.layer_norm(hidden @ out.dense.weight.T + out.dense.bias + x, (C,), out.LayerNorm.weight,
                         out.LayerNorm.bias, out.LayerNorm.eps)
    return x


class Spy:
    """Stands in for a backend: counts its calls, and answers as the backend would (None: stands aside)."""

    def __init__(self, backend: object | None) -> None:
        self.backend, self.calls = backend, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return None if self.backend is None else self.backend(*args, **kwargs)

    def __getattr__(self, name: str):  # gelu(y) and layer_norm(...) of a stood-aside backend
        return getattr(self.backend, name) if self.backend is not None else (lambda *args, **kwargs: None)


@pytest.fixture
def model_and_inputs():
    torch.manual_seed(0)
    model = BERT(tiny_config(vocab_size=300, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                             max_position_embeddings=64)).eval()
    ids = torch.randint(5, 300, (2, 48), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 40:] = 0
    return model, ids, mask


def spy_on(model: BERT) -> dict[str, list[Spy]]:
    spies: dict[str, list[Spy]] = {name: [] for name in ATTRIBUTES}
    for module in model.modules():
        for name in ATTRIBUTES:
            if name in vars(module):
                spy = Spy(vars(module)[name])
                setattr(module, name, spy)
                spies[name].append(spy)
    return spies


def test_the_untraced_forward_equals_the_math_written_out(model_and_inputs):
    model, ids, mask = model_and_inputs
    with torch.inference_mode():
        ours = model(input_ids=ids, attention_mask=mask).last_hidden_state
        expected = written_out(model, ids, mask)
    real = mask.bool()  # padded queries attend somewhere undefined; their rows are not compared
    torch.testing.assert_close(ours[real], expected[real], rtol=0, atol=2e-5)


def test_each_layer_reaches_each_backend_through_one_call(model_and_inputs):
    model, ids, mask = model_and_inputs
    layers = len(model.encoder.layer)
    with torch.inference_mode():
        before = model(input_ids=ids, attention_mask=mask).last_hidden_state
        spies = spy_on(model)
        after = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert [spy.calls for spy in spies["attention_backend"]] == [1] * layers
    assert [spy.calls for spy in spies["gelu_backend"]] == [1] * layers  # the feed-forward's first projection
    # the attention output's and the feed-forward's residual add + LayerNorm
    assert [spy.calls for spy in spies["add_layer_norm_backend"]] == [1] * (2 * layers)
    torch.testing.assert_close(after, before, rtol=0, atol=0)  # the spies answer as the backends do


def test_backends_that_stand_aside_leave_the_plain_path(model_and_inputs):
    model, ids, mask = model_and_inputs
    with torch.inference_mode():
        expected = written_out(model, ids, mask)
        for module in model.modules():
            for name in ATTRIBUTES:
                if name in vars(module) and name != "attention_backend":
                    setattr(module, name, Spy(None))  # every fast path answers None
        ours = model(input_ids=ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(ours[real], expected[real], rtol=0, atol=2e-5)


def test_a_watched_probs_point_makes_its_layer_write_the_attention_out(model_and_inputs):
    model, ids, mask = model_and_inputs
    seen = []
    with torch.inference_mode():
        plain = model(input_ids=ids, attention_mask=mask).last_hidden_state
        spies = spy_on(model)
        with model.hooks([("encoder.layer.1.attention.self.probs", lambda probs, hook: seen.append(probs))]):
            watched = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert [spy.calls for spy in spies["attention_backend"]] == [1, 0] + [1] * (len(model.encoder.layer) - 2)
    (probs,) = seen
    assert probs.shape == (2, 4, 48, 48)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4, 48))
    assert float(probs[1, :, :, 40:].max()) == 0.0  # padding gets no weight
    torch.testing.assert_close(watched, plain, rtol=0, atol=1e-5)
