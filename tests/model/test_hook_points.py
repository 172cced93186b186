"""HookPoint: an identity module whose hooks read or replace a tensor, and nothing else: no kernel concept in it; a
watched probabilities point makes its layer write the attention out."""

from __future__ import annotations

import inspect

import pytest
import torch
from tiny_models import tiny_config

import bertviz_lab.model.hook_points as hooking
from bertviz_lab.model import BERT
from bertviz_lab.model.hook_points import HookPoint, hook_points


def test_a_point_is_watched_while_any_hook_is_on_it():
    point = HookPoint()
    assert not point.is_watched
    handle = point.add_hook(lambda x, point: None)
    assert point.is_watched
    handle.remove()
    pre = point.register_forward_pre_hook(lambda module, args: None)
    assert point.is_watched
    pre.remove()
    assert not point.is_watched


def test_a_hook_replaces_the_tensor_or_returns_none_to_let_it_stand():
    point, x = HookPoint("here"), torch.ones(3)
    seen = []
    handle = point.add_hook(lambda t, p: seen.append(p.name) or t * 2)
    assert torch.equal(point(x), torch.full((3,), 2.0)) and seen == ["here"]
    handle.remove()
    handle = point.add_hook(lambda t, p: None)  # None: the tensor stands
    assert point(x) is x
    handle.remove()


def test_the_hook_points_know_nothing_of_kernels():
    source = inspect.getsource(hooking)
    for concept in ("kernel", "Reader", "handed_over", "read_only", "backend", "avx2", "sdpa"):
        assert concept not in source, concept
    assert list(inspect.signature(HookPoint.forward).parameters) == ["self", "x"]


def test_a_watched_probs_point_makes_its_layer_write_the_attention_out():
    model = BERT(tiny_config(num_hidden_layers=1)).eval()
    layer = model.encoder.layer[0].attention.self
    calls = []
    written_out = layer.attention
    layer.attention = lambda *args: calls.append(1) or written_out(*args)
    ids = torch.randint(5, 100, (1, 8))
    with torch.inference_mode():
        model(ids)
        assert calls == [] or layer.attention_backend is None  # unwatched: the backend
        calls.clear()
        with model.hooks([("encoder.layer.0.attention.self.probs", lambda p, point: None)]):
            model(ids)
    assert calls == [1]


def test_every_point_of_a_bert_by_name():
    names = list(hook_points(BERT(tiny_config(num_hidden_layers=1))))
    assert names == ["embeddings.hidden", "encoder.layer.0.attention.self.q", "encoder.layer.0.attention.self.k",
                     "encoder.layer.0.attention.self.v", "encoder.layer.0.attention.self.probs",
                     "encoder.layer.0.attention.self.context", "encoder.layer.0.attention.output.head_out",
                     "encoder.layer.0.attention.output.attn_out", "encoder.layer.0.resid_mid",
                     "encoder.layer.0.intermediate.act", "encoder.layer.0.output.mlp_out", "encoder.layer.0.hidden"]
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got str"):
        hook_points("bert")


def test_the_model_package_does_not_import_the_tracer():
    import subprocess
    import sys

    code = ("import sys, bertviz_lab.model; "
            "print(sorted(m for m in sys.modules if m.startswith(('bertviz_lab.trace', 'bertviz_lab.widgets'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
