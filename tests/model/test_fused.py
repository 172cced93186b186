"""The rules that decide when the fused GPU paths may stand in for plain modules (the paths themselves need CUDA:
tests/test_accelerators.py runs them)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bertviz_lab.model import fused


def test_a_hook_on_a_replaced_module_or_a_global_hook_rules_the_fused_path_out():
    norm, dropout = nn.LayerNorm(8), nn.Dropout(0.1)
    assert fused._unhooked(norm, dropout)
    handle = norm.register_forward_pre_hook(lambda module, args: None)
    assert not fused._unhooked(norm, dropout)
    handle.remove()
    handle = nn.modules.module.register_module_forward_hook(lambda module, args, output: None)
    try:
        assert not fused._unhooked(norm, dropout)
    finally:
        handle.remove()
    assert fused._unhooked(norm, dropout)


def test_disabled_restores_the_setting_after_an_error():
    before = fused.ENABLED
    with pytest.raises(RuntimeError), fused.disabled():
        assert fused.ENABLED is False
        raise RuntimeError("inside")
    assert fused.ENABLED is before


def test_cpu_tensors_always_take_plain_pytorch():
    x = torch.randn(2, 3, 8)
    linear = nn.Linear(8, 8)
    with torch.inference_mode():
        assert not fused.can_add_layer_norm(x, x, nn.LayerNorm(8), nn.Dropout(0.0).eval())
        assert not fused.can_linear_gelu(x, linear, "gelu_pytorch_tanh")
