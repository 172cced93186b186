"""The hook points for causal work, in TransformerLens's vocabulary: attn_out, head_out, resid_mid and mlp_out equal
their math from the weights in every family, replacing them changes the output as that math says, the untraced
forward keeps its bits, and run_with_cache(incl_bwd=True) caches the gradients autograd gives for the same tensors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from family_models import build_family_checkpoint
from tiny_models import tiny_config

from bertviz_lab.model import BERT
from bertviz_lab.model.hook_points import hook_points
from bertviz_lab.model.layers import BERTOutput, hooked, layer_norm, linear

TOL = dict(rtol=1e-5, atol=1e-5)


def tiny_bert(**overrides) -> BERT:
    torch.manual_seed(0)
    return BERT(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **overrides)).eval()


@pytest.fixture
def model() -> BERT:
    return tiny_bert()


@pytest.fixture
def ids() -> torch.Tensor:
    return torch.randint(5, 100, (2, 7), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def family_models(tmp_path_factory) -> dict[str, BERT]:
    root = tmp_path_factory.mktemp("families")
    return {family: BERT.from_pretrained(build_family_checkpoint(family, root / family, head="model", seed=i)).eval()
            for i, family in enumerate(("roberta", "distilbert", "electra"))}


def layer_input(cache, layer: int) -> torch.Tensor:
    return cache["embeddings.hidden"] if layer == 0 else cache[f"encoder.layer.{layer - 1}.hidden"]


def norm(module, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, module.normalized_shape, module.weight, module.bias, module.eps)


def check_points_against_the_weights(model: BERT, ids: torch.Tensor) -> None:
    with torch.no_grad():
        plain = model(ids).last_hidden_state
        out, cache = model.run_with_cache(ids)
    torch.testing.assert_close(out.last_hidden_state, plain, **TOL)
    B, T = ids.shape
    for i, layer in enumerate(model.encoder.layer):
        p = f"encoder.layer.{i}"
        attention = layer.attention.output
        context = cache[f"{p}.attention.self.context"].transpose(1, 2).reshape(B, T, -1)
        attn_out = context @ attention.dense.weight.T + attention.dense.bias
        torch.testing.assert_close(cache[f"{p}.attention.output.attn_out"], attn_out, **TOL)
        head_out = cache[f"{p}.attention.output.head_out"]
        assert head_out.shape == (B, model.config.num_attention_heads, T, model.config.hidden_size)
        torch.testing.assert_close(head_out.sum(1) + attention.dense.bias, attn_out, **TOL)
        resid_mid = norm(attention.LayerNorm, attn_out + layer_input(cache, i))
        torch.testing.assert_close(cache[f"{p}.resid_mid"], resid_mid, **TOL)
        inner = F.gelu(resid_mid @ layer.intermediate.dense.weight.T + layer.intermediate.dense.bias)
        mlp_out = inner @ layer.output.dense.weight.T + layer.output.dense.bias
        torch.testing.assert_close(cache[f"{p}.output.mlp_out"], mlp_out, **TOL)
        torch.testing.assert_close(cache[f"{p}.hidden"], norm(layer.output.LayerNorm, mlp_out + resid_mid), **TOL)


def test_each_new_point_equals_its_math_from_the_weights(model, ids):
    check_points_against_the_weights(model, ids)


@pytest.mark.parametrize("family", ["roberta", "distilbert", "electra"])
def test_each_new_point_equals_its_math_in_every_family(family_models, family):
    model = family_models[family]
    ids = torch.randint(5, model.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(3))
    check_points_against_the_weights(model, ids)


def test_the_points_have_the_same_names_in_every_family(family_models):
    names = {family: list(hook_points(model)) for family, model in family_models.items()}
    assert names["roberta"] == names["distilbert"] == names["electra"] == list(hook_points(tiny_bert()))


def old_output_forward(self: BERTOutput, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """BERTOutput.forward as it was before its hook points."""
    y = linear(self.dense, hidden_states, self.linear_backend)
    fused = self.add_layer_norm_backend
    if fused is not None and not hooked(self.LayerNorm, self.dropout):
        norm, dropout_p = self.LayerNorm, self.dropout.p if self.training else 0.0
        out = fused(y, residual, norm.weight, norm.bias, norm.eps, dropout_p)
        if out is not None:
            return out
    return layer_norm(self.LayerNorm, self.dropout(y) + residual, fused)


@pytest.mark.parametrize("backends", [True, False], ids=["backends", "plain"])
def test_the_untraced_forward_keeps_its_bits(monkeypatch, backends):
    torch.manual_seed(0)
    model = BERT(tiny_config(vocab_size=300, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                             max_position_embeddings=64)).eval()
    if not backends:
        model.set_backend(fast=False)
    ids = torch.randint(5, 300, (2, 48), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 40:] = 0
    with torch.inference_mode():
        now = model(input_ids=ids, attention_mask=mask).last_hidden_state
        monkeypatch.setattr(BERTOutput, "forward", old_output_forward)
        before = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.equal(now, before)


def test_replacing_attn_out_feeds_the_replacement_to_the_residual_add(model, ids):
    replacement = torch.randn(2, 7, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad(), model.hooks([("encoder.layer.0.attention.output.attn_out", lambda x, point: replacement)]):
        out, cache = model.run_with_cache(ids)
    expected = norm(model.encoder.layer[0].attention.output.LayerNorm, replacement + cache["embeddings.hidden"])
    torch.testing.assert_close(cache["encoder.layer.0.resid_mid"], expected, **TOL)
    assert torch.equal(cache["encoder.layer.0.attention.output.attn_out"], replacement)  # the cache reads after it


def test_replacing_mlp_out_feeds_the_replacement_to_the_residual_add(model, ids):
    replacement = torch.randn(2, 7, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad(), model.hooks([("encoder.layer.1.output.mlp_out", lambda x, point: replacement)]):
        out, cache = model.run_with_cache(ids)
    expected = norm(model.encoder.layer[1].output.LayerNorm, replacement + cache["encoder.layer.1.resid_mid"])
    torch.testing.assert_close(out.last_hidden_state, expected, **TOL)


def test_replacing_head_out_makes_attn_out_the_sum_of_the_replacement(model, ids):
    def drop_head_2(head_out, point):
        head_out = head_out.clone()
        head_out[:, 2] = 0
        return head_out

    name = "encoder.layer.0.attention"
    with torch.no_grad():
        _, plain = model.run_with_cache(ids, names_filter=f"{name}.self.context")
        with model.hooks([(f"{name}.output.head_out", drop_head_2)]):
            _, cache = model.run_with_cache(ids, names_filter=lambda n: n.startswith(f"{name}.output"))
    dense = model.encoder.layer[0].attention.output.dense
    head_out = cache[f"{name}.output.head_out"]
    assert float(head_out[:, 2].abs().max()) == 0.0
    torch.testing.assert_close(cache[f"{name}.output.attn_out"], head_out.sum(1) + dense.bias, **TOL)
    context = plain[f"{name}.self.context"].clone()
    context[:, 2] = 0  # the same as zeroing head 2's context before the projection
    torch.testing.assert_close(cache[f"{name}.output.attn_out"], dense(context.transpose(1, 2).reshape(2, 7, 64)),
                               **TOL)


def test_head_out_is_formed_only_while_watched(model, ids, monkeypatch):
    calls = []
    original = BERTOutput._from_heads
    monkeypatch.setattr(BERTOutput, "_from_heads", lambda self, x: calls.append(1) or original(self, x))
    with torch.no_grad():
        model(ids)
        model.run_with_cache(ids, names_filter=lambda n: not n.endswith("head_out"))
        assert calls == []
        model.run_with_cache(ids, names_filter="encoder.layer.1.attention.output.head_out")
    assert calls == [1]


def test_a_watched_mlp_out_sees_the_whole_sequence_of_a_chunked_feed_forward(ids):
    model = tiny_bert(chunk_size_feed_forward=7)
    with torch.no_grad():
        plain = model(ids).last_hidden_state
        out, cache = model.run_with_cache(ids, names_filter=lambda n: n.endswith(("mlp_out", "resid_mid")))
    assert cache["encoder.layer.0.output.mlp_out"].shape == (2, 7, 64)
    torch.testing.assert_close(out.last_hidden_state, plain, **TOL)


def test_cross_attention_has_its_own_attn_out_and_head_out():
    torch.manual_seed(0)
    model = BERT(tiny_config(is_decoder=True, add_cross_attention=True, hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0)).eval()
    ids = torch.randint(5, 100, (1, 5), generator=torch.Generator().manual_seed(1))
    encoder_states = torch.randn(1, 6, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, encoder_hidden_states=encoder_states,
                                        names_filter=lambda n: ".crossattention.output." in n)
    bias = model.encoder.layer[0].crossattention.output.dense.bias
    head_out = cache["encoder.layer.0.crossattention.output.head_out"]
    torch.testing.assert_close(head_out.sum(1) + bias, cache["encoder.layer.0.crossattention.output.attn_out"], **TOL)


# gradients -------------------------------------------------------------------------------------------
def metric(out) -> torch.Tensor:
    return out.last_hidden_state[:, 0].pow(2).sum()


NAMES = ["embeddings.hidden", "encoder.layer.0.attention.output.head_out", "encoder.layer.0.attention.output.attn_out",
         "encoder.layer.0.resid_mid", "encoder.layer.1.attention.self.probs", "encoder.layer.1.output.mlp_out"]


def test_incl_bwd_caches_the_gradients_autograd_gives(model, ids):
    captured = {}

    def capture(tensor, point):
        captured[point.name] = tensor

    with model.hooks([(NAMES, capture)]):
        expected = torch.autograd.grad(metric(model(ids)), [captured[name] for name in NAMES])
    with torch.no_grad():  # run_with_cache turns grad on for the gradients it was asked for
        out, cache = model.run_with_cache(ids, names_filter=NAMES, incl_bwd=True, metric=metric)
    assert list(cache) == NAMES + [name + "_grad" for name in NAMES]
    for name, grad in zip(NAMES, expected):
        torch.testing.assert_close(cache[name + "_grad"], grad, **TOL)
        assert not cache[name + "_grad"].requires_grad
    assert all(p.grad is None for p in model.parameters())  # autograd.grad, not backward: no .grad is touched
    torch.testing.assert_close(out.last_hidden_state, model(ids).last_hidden_state, **TOL)


def test_incl_bwd_works_on_a_frozen_model_and_gives_zeros_after_the_metric(model, ids):
    model.requires_grad_(False)
    _, cache = model.run_with_cache(ids, names_filter=["embeddings.hidden", "encoder.layer.1.hidden"], incl_bwd=True,
                                    metric=lambda out: out.last_hidden_state[0, 0, 0])
    assert float(cache["embeddings.hidden_grad"].abs().sum()) > 0
    assert float(cache["encoder.layer.1.hidden_grad"][0, 0, 0]) == 1.0
    assert float(cache["encoder.layer.1.hidden_grad"].abs().sum()) == 1.0


def test_a_backward_hook_sees_and_replaces_the_gradient_and_goes_on_exit(model, ids):
    seen = {}

    def keep(grad, point):
        seen[point.name] = grad

    def double(grad, point):
        return 2 * grad

    with model.hooks(bwd_hooks=[("embeddings.hidden", keep)]):
        metric(model(ids)).backward()
    plain = seen.pop("embeddings.hidden")
    model.zero_grad()
    with model.hooks(bwd_hooks=[("encoder.layer.1.resid_mid", double), ("embeddings.hidden", keep)]):
        metric(model(ids)).backward()  # every path from the embeddings to the output runs through resid_mid
    torch.testing.assert_close(seen["embeddings.hidden"], 2 * plain, **TOL)
    assert all(not p._forward_hooks for p in hook_points(model).values())
    seen.clear()
    metric(model(ids)).backward()
    assert seen == {}


def test_backward_hooks_go_also_after_an_error_and_from_tensors_already_made(model, ids):
    seen = []
    with pytest.raises(RuntimeError, match="inside"):
        with model.hooks(bwd_hooks=[("encoder.layer.0.resid_mid", lambda grad, point: seen.append(grad))]):
            value = metric(model(ids))
            raise RuntimeError("inside")
    value.backward()  # the graph made inside the block no longer calls the hook
    assert seen == [] and all(not p._forward_hooks for p in hook_points(model).values())


# bad input -------------------------------------------------------------------------------------------
def test_incl_bwd_without_a_metric_is_one_clear_error(model, ids):
    with pytest.raises(ValueError, match=r"incl_bwd=True needs metric="):
        model.run_with_cache(ids, incl_bwd=True)
    with pytest.raises(ValueError, match=r"metric= is only used with incl_bwd=True"):
        model.run_with_cache(ids, metric=metric)


def test_a_metric_that_is_no_scalar_is_named_by_its_shape(model, ids):
    with pytest.raises(ValueError, match=r"metric must return a scalar tensor to differentiate, got \(2, 7, 64\)"):
        model.run_with_cache(ids, incl_bwd=True, metric=lambda out: out.last_hidden_state)
    with pytest.raises(ValueError, match=r"got float"):
        model.run_with_cache(ids, incl_bwd=True, metric=lambda out: out.last_hidden_state.sum().item())
    with pytest.raises(ValueError, match=r"does not depend on the model's output"):
        model.run_with_cache(ids, incl_bwd=True, metric=lambda out: out.last_hidden_state.detach().sum())
    assert all(not p._forward_hooks for p in hook_points(model).values())


def test_gradients_under_inference_mode_are_a_clear_error(model, ids):
    with torch.inference_mode():
        with pytest.raises(RuntimeError, match=r"inference_mode"):
            model.run_with_cache(ids, incl_bwd=True, metric=metric)
        with pytest.raises(RuntimeError, match=r"bwd_hooks need autograd"):
            with model.hooks(bwd_hooks=[("embeddings.hidden", lambda grad, point: None)]):
                pass


def test_an_unknown_point_name_is_named_for_forward_and_backward_hooks(model, ids):
    with pytest.raises(KeyError, match=r"no hook point named 'encoder.layer.0.attn_out'"):
        model.run_with_cache(ids, names_filter="encoder.layer.0.attn_out", incl_bwd=True, metric=metric)
    with pytest.raises(KeyError, match=r"did you mean encoder.layer.0.resid_mid"):
        with model.hooks(bwd_hooks=[("encoder.layer.0.resid_mdi", lambda grad, point: None)]):
            pass
    with pytest.raises(TypeError, match=r"pairs with a callable hook in bwd_hooks"):
        with model.hooks(bwd_hooks=[("embeddings.hidden",)]):
            pass
