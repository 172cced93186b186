"""HookPoint: hooks that read or replace a tensor; readers (caches, traces) and the hand-over flag they are given."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_config
from torch import nn

from bertviz_lab.model import BERT
from bertviz_lab.model.hook_points import HookPoint, Reader, hook_points


def test_a_point_is_read_only_while_every_hook_on_it_is_a_reader():
    point = HookPoint()
    assert not point.is_watched and not point.is_read_only
    reader = point.add_hook(Reader(lambda x, point, handed_over: None))
    assert point.is_watched and point.is_read_only
    plain = point.register_forward_hook(lambda module, args, output: None)
    assert not point.is_read_only
    plain.remove()
    assert point.is_read_only
    user = point.add_hook(lambda x, point: None)  # any user hook may replace the tensor
    assert not point.is_read_only
    user.remove()
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
    for _ in range(3):  # traces one after another: the point forgets readers once removed
        point.add_hook(Reader(lambda x, point, handed_over: None)).remove()
    assert len(point._reader_ids) == 1


def test_a_hook_replaces_the_tensor_and_a_reader_never_does():
    point, x = HookPoint("here"), torch.ones(3)
    seen = []
    handle = point.add_hook(lambda t, p: seen.append(p.name) or t * 2)
    assert torch.equal(point(x), torch.full((3,), 2.0)) and seen == ["here"]
    handle.remove()
    handle = point.add_hook(lambda t, p: None)  # None: the tensor stands
    assert point(x) is x
    handle.remove()
    handle = point.add_hook(Reader(lambda t, p, handed_over: t * 2))
    assert point(x) is x
    handle.remove()


def test_readers_are_told_whether_the_tensor_is_handed_over():
    point, seen = HookPoint(), []
    point.add_hook(Reader(lambda t, point, handed_over: seen.append((point, handed_over))))
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
