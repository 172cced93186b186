"""HookPoint: hooks that read or replace a tensor, the read-only promise and the hand-over flag they are given."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_config
from torch import nn

from bertviz_lab.model import BERT
from bertviz_lab.model.hook_points import HookPoint, hook_points


def test_a_point_is_read_only_while_every_hook_on_it_promises_to_read_only():
    point = HookPoint()
    assert not point.is_watched and not point.is_read_only
    reader = point.add_hook(lambda x, **_: None, read_only=True)
    assert point.is_watched and point.is_read_only
    plain = point.register_forward_hook(lambda module, args, output: None)
    assert not point.is_read_only
    plain.remove()
    assert point.is_read_only
    pre = point.register_forward_pre_hook(lambda module, args: None)
    assert not point.is_read_only
    pre.remove()
    everywhere = nn.modules.module.register_module_forward_hook(lambda module, args, output: None)
    try:
        assert not point.is_read_only
    finally:
        everywhere.remove()
    reader.remove()
    assert not point.is_watched and not point.is_read_only
    for _ in range(3):  # traces one after another: the point forgets read-only hooks once removed
        point.add_hook(lambda x, **_: None, read_only=True).remove()
    assert len(point._read_only_ids) == 1


def test_a_hook_replaces_the_tensor_unless_it_promised_to_read_only():
    point, x = HookPoint(), torch.ones(3)
    handle = point.add_hook(lambda t, **_: t * 2)
    assert torch.equal(point(x), torch.full((3,), 2.0))
    handle.remove()
    handle = point.add_hook(lambda t, **_: t * 2, read_only=True)
    assert point(x) is x
    handle.remove()
    assert point(x) is x


def test_hooks_are_told_the_point_and_whether_the_tensor_is_handed_over():
    point, seen = HookPoint(), []
    point.add_hook(lambda t, *, point, handed_over: seen.append((point, handed_over)), read_only=True)
    point(torch.ones(2))
    point(torch.ones(2), handed_over=True)
    assert seen == [(point, False), (point, True)]
    with pytest.raises(TypeError):
        point(torch.ones(2), True)  # the hand-over is a keyword, never a positional flag


def test_every_point_of_a_bert_by_name():
    names = list(hook_points(BERT(tiny_config(num_hidden_layers=1))))
    assert names == ["embeddings.hidden", "encoder.layer.0.attention.self.q", "encoder.layer.0.attention.self.k",
                     "encoder.layer.0.attention.self.v", "encoder.layer.0.attention.self.probs",
                     "encoder.layer.0.attention.self.context", "encoder.layer.0.intermediate.act",
                     "encoder.layer.0.hidden"]
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got str"):
        hook_points("bert")


def test_the_model_package_does_not_import_the_tracer():
    import subprocess
    import sys

    code = ("import sys, bertviz_lab.model; "
            "print(sorted(m for m in sys.modules if m.startswith(('bertviz_lab.trace', 'bertviz_lab.widgets'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
