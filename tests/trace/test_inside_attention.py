"""Inside attention: q, k, v, each head's output and the feed-forward activations recorded on request and equal to
a computation by hand from the layer's weights; heads switched off by ablate() equal zeroing them by hand."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from tiny_models import tiny_config

from bertviz_lab.model import BERT, BERTForMaskedLM
from bertviz_lab.model.hook_points import hook_points
from bertviz_lab.trace import ablate, trace


def padded_inputs(vocab: int = 100) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    ids = torch.randint(5, vocab, (2, 12), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def hooks_on(model) -> int:
    return sum(len(p._forward_hooks) + len(p._forward_pre_hooks) for p in hook_points(model).values())


@pytest.fixture(params=[16, 8], ids=["head size 16 (CPU kernel)", "head size 8 (SDPA)"])
def model(request) -> BERT:
    torch.manual_seed(0)
    heads = 64 // request.param
    # weights 10x the usual spread: heads whose outputs differ enough across positions to see an ablation
    config = tiny_config(num_attention_heads=heads, attention_probs_dropout_prob=0.0, initializer_range=0.2)
    return BERT(config).eval()


def by_hand(model: BERT, inputs: dict[str, torch.Tensor], layer: int) -> dict[str, torch.Tensor]:
    """q, k, v, probs, context and the feed-forward activations of one layer from its weights and its input."""
    block = model.encoder.layer[layer]
    attention = block.attention.self
    with trace(model, attentions=False, hidden_states=True, shapes=False) as t:
        model(**inputs)
    x = t.hidden_states[layer]  # the layer's input
    B, T, C = x.shape
    nh, hs = attention.num_heads, attention.head_size
    qkv = F.linear(x, attention.qkv.weight, attention.qkv.bias).view(B, T, 3, nh, hs).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    additive = (1.0 - inputs["attention_mask"][:, None, None, :].float()) * torch.finfo(torch.float32).min
    probs = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(hs) + additive, dim=-1)
    context = probs @ v
    merged = context.transpose(1, 2).reshape(B, T, C)
    after_attention = block.attention.output.LayerNorm(F.linear(merged, block.attention.output.dense.weight,
                                                                block.attention.output.dense.bias) + x)
    mlp = F.gelu(F.linear(after_attention, block.intermediate.dense.weight, block.intermediate.dense.bias))
    return {"q": q, "k": k, "v": v, "probs": probs, "context": context, "mlp": mlp}


def test_traced_q_k_v_context_and_mlp_equal_the_layer_computed_by_hand(model):
    inputs = padded_inputs()
    with torch.no_grad(), trace(model, qkv=True, context=True, mlp=True, shapes=False) as t:
        model(**inputs)
    assert sorted(t.q) == sorted(t.k) == sorted(t.v) == sorted(t.context) == sorted(t.mlp) == [0, 1]
    for layer in (0, 1):
        with torch.no_grad():
            expected = by_hand(model, inputs, layer)
        for kind in ("q", "k", "v", "context", "mlp"):
            got = getattr(t, kind)[layer]
            assert got.device.type == "cpu" and not got.requires_grad
            torch.testing.assert_close(got, expected[kind], rtol=0, atol=1e-5, msg=f"{kind} of layer {layer}")
        torch.testing.assert_close(t.attentions[layer], expected["probs"], rtol=0, atol=1e-5)


def test_probabilities_recomputed_from_the_traced_q_and_k_equal_the_traced_ones(model):
    inputs = padded_inputs()
    with torch.no_grad(), trace(model, qkv=True, shapes=False) as t:
        model(**inputs)
    hs = model.config.hidden_size // model.config.num_attention_heads
    additive = (1.0 - inputs["attention_mask"][:, None, None, :].float()) * torch.finfo(torch.float32).min
    for layer, probs in enumerate(t.attentions):
        recomputed = torch.softmax(t.q[layer] @ t.k[layer].transpose(-2, -1) / math.sqrt(hs) + additive, dim=-1)
        torch.testing.assert_close(recomputed, probs, rtol=0, atol=1e-5)


def test_nothing_inside_is_kept_unless_asked_and_watching_changes_no_output(model):
    inputs = padded_inputs()
    with torch.no_grad():
        plain = model(**inputs).last_hidden_state
        with trace(model, shapes=False) as t:
            model(**inputs)
        assert t.q == t.k == t.v == t.context == t.mlp == {}
        with trace(model, attentions=False, shapes=False, qkv=True, context=True, mlp=True) as t:
            watched = model(**inputs).last_hidden_state
            assert hooks_on(model) == 5 * model.config.num_hidden_layers
    assert torch.equal(watched, plain)  # read-only hooks: bit for bit
    assert hooks_on(model) == 0


def test_layers_heads_and_batch_rows_select_what_is_kept(model):
    inputs = padded_inputs()
    inside = dict(attentions=False, qkv=True, context=True, mlp=True, shapes=False)
    with torch.no_grad(), trace(model, layers=1, heads=[0, 2], batch_index=1, **inside) as t:
        model(**inputs)
    with torch.no_grad(), trace(model, **inside) as whole:
        model(**inputs)
    assert list(t.q) == [1]
    for kind in ("q", "k", "v", "context"):
        assert torch.equal(getattr(t, kind)[1], getattr(whole, kind)[1][1:2, [0, 2]])
    assert torch.equal(t.mlp[1], whole.mlp[1][1:2])  # no heads in the feed-forward


def test_a_model_without_the_points_says_which_option_cannot_be_met():
    with pytest.raises(ValueError, match=r"qkv=True was given but Linear has no q hook points"):
        with trace(torch.nn.Linear(2, 2), qkv=True):
            pass


# ablation ----------------------------------------------------------------------------------------------
def zero_by_hand(model: BERT, layer: int, head: int, mode: str):
    """A plain forward hook on the layer's attention module that replaces one head's columns of its merged
    output: zeros, or their mean over positions."""
    hs = model.config.hidden_size // model.config.num_attention_heads

    def hook(module, args, output):
        out = output.clone()
        columns = out[..., head * hs:(head + 1) * hs]
        out[..., head * hs:(head + 1) * hs] = 0 if mode == "zero" else columns.mean(dim=1, keepdim=True)
        return out

    return model.encoder.layer[layer].attention.self.register_forward_hook(hook)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablating_a_head_equals_replacing_its_output_by_hand(model, mode):
    inputs = padded_inputs()
    with torch.no_grad():
        plain = model(**inputs).last_hidden_state
        with ablate(model, heads={(1, 2)}, mode=mode):
            ablated = model(**inputs).last_hidden_state
        handle = zero_by_hand(model, 1, 2, mode)
        by_hand_output = model(**inputs).last_hidden_state
        handle.remove()
    torch.testing.assert_close(ablated, by_hand_output, rtol=0, atol=1e-6)
    assert (ablated - plain).abs().max() > 1e-3


def test_nested_ablations_compose_and_every_hook_goes_on_exit(model):
    inputs = padded_inputs()
    with torch.no_grad():
        with ablate(model, heads={(0, 1), (1, 0)}):
            together = model(**inputs).last_hidden_state
        with ablate(model, heads={(0, 1)}), ablate(model, heads=[(-1, 0)]):
            nested = model(**inputs).last_hidden_state
            assert hooks_on(model) == 2
    assert torch.equal(together, nested)
    assert hooks_on(model) == 0
    with pytest.raises(RuntimeError, match="inside"), ablate(model, heads={(0, 0)}):
        raise RuntimeError("inside")
    assert hooks_on(model) == 0


def test_ablation_shows_in_a_trace_of_the_same_forward_and_in_the_mlm_predictions():
    torch.manual_seed(0)
    model = BERTForMaskedLM(tiny_config(attention_probs_dropout_prob=0.0)).eval()
    inputs = padded_inputs()
    with torch.no_grad(), ablate(model, heads={(0, 3)}), trace(model, context=True, shapes=False) as t:
        ablated_logits = model(**inputs)
    assert torch.equal(t.context[0][:, 3], torch.zeros_like(t.context[0][:, 3]))
    assert t.context[0][:, :3].abs().sum() > 0
    with torch.no_grad():
        plain_logits = model(**inputs)
    assert not torch.equal(ablated_logits, plain_logits)


@pytest.mark.parametrize("heads, error, message", [
    ({(2, 0)}, ValueError, r"heads holds \(2, 0\): the model has 2 layers \(0..1\)"),
    ({(0, 4)}, ValueError, r"heads holds \(0, 4\): each layer has 4 heads \(0..3\)"),
    ({(0,)}, TypeError, r"\(layer, head\) pairs of ints, got \(0,\)"),
    ("0,1", TypeError, r"heads must be a set of \(layer, head\) pairs, got '0,1'"),
])
def test_bad_heads_name_the_pair_and_the_valid_range(heads, error, message):
    model = BERT(tiny_config())
    with pytest.raises(error, match=message), ablate(model, heads=heads):
        pass
    assert hooks_on(model) == 0


def test_an_unknown_mode_and_a_model_without_heads_are_errors():
    with pytest.raises(ValueError, match="mode='drop': use 'zero' or 'mean'"), ablate(BERT(tiny_config()), {(0, 0)},
                                                                                      mode="drop"):
        pass
    with pytest.raises(ValueError, match="Linear has no attention `context` hook points"), \
            ablate(torch.nn.Linear(2, 2), {(0, 0)}):
        pass
