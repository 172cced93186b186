"""A finished trace is freed as soon as nobody holds it: its tensors (75 MB of attention maps for MiniLM at 512
tokens) go back to the allocator at once instead of waiting for a garbage collection, so the next traced forward
reuses that memory rather than faulting in fresh pages."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from bertviz_lab.model import BERT
from bertviz_lab.trace import trace


@pytest.mark.parametrize("options", [dict(shapes=False), dict(shapes=True), dict(qkv=True, hidden_states=True)])
def test_a_dropped_trace_frees_its_tensors_without_a_garbage_collection(tiny_config, options):
    model = BERT(tiny_config()).eval()
    ids = torch.randint(5, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    gc.collect()
    gc.disable()
    try:
        with torch.inference_mode(), trace(model, attentions=True, **options) as recorded:
            model(ids)
        held, attention = weakref.ref(recorded), weakref.ref(recorded.attentions[0])
        del recorded
        assert held() is None and attention() is None
    finally:
        gc.enable()
