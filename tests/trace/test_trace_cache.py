"""A Trace is a reading layer over an activation cache keyed by hook name: it records through the model's hooks API
what its options name, and holds what run_with_cache would."""

from __future__ import annotations

import pytest
import torch
from trace_testlib import hook_count

from bertviz_lab.trace import trace
from bertviz_lab.trace.hooks import site


@pytest.mark.parametrize(("name", "expected"), [
    ("embeddings.hidden", ("hidden_states", 0)),
    ("bert.encoder.layer.2.hidden", ("hidden_states", 3)),
    ("encoder.layer.0.attention.self.probs", ("attentions", 0)),
    ("encoder.layer.11.crossattention.self.probs", ("cross_attentions", 11)),
    ("encoder.layer.1.attention.self.k", ("k", 1)),
    ("encoder.layer.1.crossattention.self.k", None),  # cross-attention's insides are not traced
    ("encoder.layer.3.intermediate.act", ("mlp", 3)),
    ("encoder.layer.3.output", None),
])
def test_a_hook_name_says_what_it_holds_and_for_which_layer(name, expected):
    assert site(name) == expected


def test_the_options_choose_hook_names_and_the_cache_is_keyed_by_them(tiny_bert, batch):
    ids, mask, types = batch
    with torch.no_grad(), trace(tiny_bert, hidden_states=True, qkv=True, layers=[1], shapes=False) as t:
        # a reader per chosen point, the model's start and end (each a hook with keywords: counted in two dicts)
        assert hook_count(tiny_bert) == len(t.names) + 2 * 2  # a hook a point; the model's start and end (kwargs)
        tiny_bert(ids, mask, types)
    block = "encoder.layer.1.attention.self"
    assert t.names == ["embeddings.hidden", f"{block}.q", f"{block}.k", f"{block}.v", f"{block}.probs",
                       "encoder.layer.1.hidden"]
    assert list(t.cache) == t.names  # recorded in the order the forward reached them
    assert t.cache[f"{block}.probs"] is t.attention(1) and t.cache["encoder.layer.1.hidden"] is t.hidden_state(2)
    assert t.cache[f"{block}.k"] is t.k[1]
    with torch.no_grad():
        _, cache = tiny_bert.run_with_cache(ids, mask, types, names_filter=t.names, device="cpu")
    assert set(cache) == set(t.cache)
    for name, tensor in cache.items():
        torch.testing.assert_close(t.cache[name], tensor, rtol=0, atol=1e-6)
    assert hook_count(tiny_bert) == 0


def test_a_names_filter_adds_any_hook_point_and_an_unknown_name_is_named(tiny_bert, batch):
    ids, mask, types = batch
    act = [f"encoder.layer.{i}.intermediate.act" for i in range(3)]
    with torch.no_grad(), trace(tiny_bert, attentions=False, shapes=False, batch_index=[0, 2],
                                names_filter=lambda name: name.endswith("intermediate.act")) as t:
        tiny_bert(ids, mask, types)
    assert t.names == act and list(t.cache) == act
    with torch.no_grad():
        _, cache = tiny_bert.run_with_cache(ids, mask, types, names_filter=act)
    for layer, name in enumerate(act):
        assert t.mlp[layer] is t.cache[name]
        torch.testing.assert_close(t.cache[name], cache[name][[0, 2]], rtol=0, atol=0)
    with pytest.raises(KeyError, match="no hook point named 'embeddings.hiden'; did you mean embeddings.hidden"):
        with trace(tiny_bert, names_filter="embeddings.hiden"):
            pass
    assert hook_count(tiny_bert) == 0
