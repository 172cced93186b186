"""model.hooks() and model.run_with_cache(), as TransformerLens has them: hooks by name or filter, removed on exit
and on error, nested blocks that compose, and a cache keyed by hook name."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_config

from bertviz_lab.model import BERT, BERTForMaskedLM
from bertviz_lab.model.hook_points import ActivationCache, hook_points


@pytest.fixture
def model() -> BERT:
    torch.manual_seed(0)
    return BERT(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()


@pytest.fixture
def ids() -> torch.Tensor:
    return torch.randint(5, 100, (2, 7), generator=torch.Generator().manual_seed(1))


def hooks_on_points(model) -> int:
    return sum(len(p._forward_hooks) + len(p._forward_pre_hooks) for p in hook_points(model).values())


def test_every_point_is_named_by_its_key():
    backbone = BERT(tiny_config())
    assert all(point.name == name for name, point in backbone.hook_points().items())
    head = BERTForMaskedLM(tiny_config())
    names = {point.name for point in head.modules() if point in head.hook_points().values()}
    assert all(point.name == name for name, point in hook_points(head).items())
    assert "bert.encoder.layer.1.attention.self.probs" in names
    assert head.bert.encoder.layer[0].attention.self.probs.name == "bert.encoder.layer.0.attention.self.probs"


def test_a_hook_by_name_replaces_the_tensor_and_goes_on_exit(model, ids):
    replacement = torch.randn(2, 7, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        plain = model(ids).last_hidden_state
        with model.hooks([("embeddings.hidden", lambda x, point: replacement)]) as hooked:
            assert hooked is model and hooks_on_points(model) == 1
            got = model(ids).last_hidden_state
        by_hand = model.encoder(replacement)  # what the layers make of the replaced embeddings
        after = model(ids).last_hidden_state
    assert torch.equal(got, by_hand)
    assert hooks_on_points(model) == 0 and torch.equal(after, plain)


def test_hooks_go_also_after_an_error(model, ids):
    with pytest.raises(RuntimeError, match="inside"):
        with model.hooks([(lambda name: name.endswith(".hidden"), lambda x, point: None)]):
            assert hooks_on_points(model) == 3
            raise RuntimeError("inside")
    assert hooks_on_points(model) == 0


def test_nested_blocks_compose_in_order_and_the_inner_one_goes_first(model, ids):
    seen = []
    double = ("encoder.layer.0.hidden", lambda x, point: seen.append(("outer", point.name)) or x * 2)
    plus_one = ("encoder.layer.0.hidden", lambda x, point: seen.append(("inner", point.name)) or x + 1)
    with torch.no_grad():
        layer0 = model.encoder.layer[0](model.embeddings(ids))
        with model.hooks([double]):
            with model.hooks([plus_one]):
                _, cache = model.run_with_cache(ids, names_filter="encoder.layer.0.hidden")
                assert hooks_on_points(model) == 2
            assert hooks_on_points(model) == 1
            _, outer_only = model.run_with_cache(ids, names_filter="encoder.layer.0.hidden")
    assert seen == [("outer", "encoder.layer.0.hidden"), ("inner", "encoder.layer.0.hidden"),
                    ("outer", "encoder.layer.0.hidden")]
    torch.testing.assert_close(cache["encoder.layer.0.hidden"], layer0 * 2 + 1)
    torch.testing.assert_close(outer_only["encoder.layer.0.hidden"], layer0 * 2)
    assert hooks_on_points(model) == 0


def test_filters_by_name_names_and_predicate_and_an_unknown_name_is_named(model, ids):
    with torch.no_grad():
        _, one = model.run_with_cache(ids, names_filter="encoder.layer.1.attention.self.probs")
        _, some = model.run_with_cache(ids, names_filter=["encoder.layer.1.hidden", "embeddings.hidden"])
        _, probs = model.run_with_cache(ids, names_filter=lambda name: name.endswith("probs"))
        _, every = model.run_with_cache(ids)
    assert list(one) == ["encoder.layer.1.attention.self.probs"]
    assert list(some) == ["embeddings.hidden", "encoder.layer.1.hidden"]  # in model order
    assert list(probs) == [f"encoder.layer.{i}.attention.self.probs" for i in range(2)]
    assert list(every) == list(hook_points(model))
    with pytest.raises(KeyError, match="no hook point named 'encoder.layer.0.attention.probs'; did you mean "
                                       "encoder.layer.0.attention.self.probs"):
        model.run_with_cache(ids, names_filter="encoder.layer.0.attention.probs")
    with pytest.raises(TypeError, match=r"hooks\(\) takes \(name_or_filter, hook\) pairs"):
        with model.hooks([("embeddings.hidden",)]):
            pass
    assert hooks_on_points(model) == 0


def test_the_cache_holds_detached_copies_equal_to_the_forward(model, ids):
    output, cache = model.run_with_cache(ids, names_filter=lambda name: "hidden" in name, device="cpu")
    assert isinstance(cache, ActivationCache)
    assert all(not t.requires_grad and t.grad_fn is None for t in cache.values())
    torch.testing.assert_close(cache["encoder.layer.1.hidden"], output.last_hidden_state.detach(), rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(cache["embeddings.hidden"], model.embeddings(ids), rtol=0, atol=0)
        plain = model(ids).last_hidden_state
        probs = model.run_with_cache(ids, names_filter=lambda name: name.endswith("probs"))[1]
    torch.testing.assert_close(output.last_hidden_state.detach(), plain, rtol=0, atol=1e-5)  # autograd: SDPA
    for layer in range(2):
        p = probs[f"encoder.layer.{layer}.attention.self.probs"]
        assert p.shape == (2, 4, 7, 7)
        torch.testing.assert_close(p.sum(-1), torch.ones(2, 4, 7))
    with pytest.raises(KeyError, match="'embeddings.hiden' is not in this cache; did you mean embeddings.hidden"):
        cache["embeddings.hiden"]
