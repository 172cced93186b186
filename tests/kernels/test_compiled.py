"""The compiled encoder (model.set_backend(compiled=True)): one torch.compile graph of the layers for large fp32 CPU
inference batches, within 1e-5 of the eager layers; it stands aside wherever a hook, autograd, a statistics request,
dropout or a short batch needs the eager layers, follows weights edited in place, and falls back with one warning
when the compile fails. One compile per module (about 10 s on two cores), shared by the tests that need it."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from tiny_models import tiny_config

from bertviz_lab import kernels
from bertviz_lab.kernels import compiled as compiled_layers
from bertviz_lab.model import BERT
from bertviz_lab.model.attention_statistics import attention_statistics

pytestmark = pytest.mark.skipif(compiled_layers.compiler_missing() is not None,
                                reason=str(compiled_layers.compiler_missing()))

ROWS = (20, 32)  # 640 tokens, over MIN_ROWS; the tiny config's 32 positions


def inputs(batch: int = ROWS[0], seq: int = ROWS[1], seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 100, (batch, seq), generator=generator)
    mask = torch.ones_like(ids)
    mask[::3, seq - 7:] = 0  # padded rows too
    return {"input_ids": ids, "attention_mask": mask}


def eager(model: BERT, **given: torch.Tensor) -> torch.Tensor:
    with kernels.override(model, compiled=False), torch.inference_mode():
        return model(**given).last_hidden_state


@pytest.fixture(scope="module")
def compiled_model() -> BERT:
    torch.manual_seed(0)
    model = BERT(tiny_config()).eval()
    model.set_backend(compiled=True)
    with torch.inference_mode():
        model(**inputs())  # the compile, once for the module
    return model


@pytest.fixture
def counted(compiled_model: BERT, monkeypatch):
    """The module's model, and a list that gets one item per batch its compiled graph answered (counted on the
    class: an override block gives the model a new backend on exit)."""
    answered: list[int] = []
    call = compiled_layers.CompiledLayers.__call__

    def counting(self, layers, hidden_states, mask):
        y = call(self, layers, hidden_states, mask)
        if y is not None:
            answered.append(hidden_states.shape[0] * hidden_states.shape[1])
        return y

    monkeypatch.setattr(compiled_layers.CompiledLayers, "__call__", counting)
    return compiled_model, answered


def test_the_graph_answers_a_large_batch_within_1e_5_of_the_eager_layers(counted):
    model, answered = counted
    for batch, seq in ((20, 32), (17, 31), (64, 9)):  # one graph for every shape of 512 tokens or more
        given = inputs(batch, seq, seed=batch)
        with torch.inference_mode():
            out = model(**given).last_hidden_state
        reference = eager(model, **given)
        torch.testing.assert_close(out, reference, rtol=0, atol=1e-5)
    assert answered == [640, 527, 576]


def test_the_eager_layers_run_where_a_hook_autograd_statistics_dropout_or_a_short_batch_needs_them(counted):
    model, answered = counted
    given = inputs()
    reference = eager(model, **given)
    with torch.inference_mode():
        _, cache = model.run_with_cache(**given, names_filter="encoder.layer.0.attention.self.probs")
    assert cache["encoder.layer.0.attention.self.probs"].shape == (20, 4, 32, 32)
    seen = []
    handle = model.encoder.layer[1].intermediate.dense.register_forward_hook(lambda *args: seen.append(1))
    try:
        with torch.inference_mode():
            hooked = model(**given).last_hidden_state
    finally:
        handle.remove()
    assert seen == [1] and torch.equal(hooked, reference)
    with torch.enable_grad():
        assert model(**given).last_hidden_state.requires_grad
    valid = given["attention_mask"].float()
    kinds = torch.zeros(*valid.shape, 3)
    with torch.inference_mode(), attention_statistics([0, 1], valid, kinds) as stats:
        model(**given)
    assert set(stats) == {0, 1}
    model.train()
    try:
        with torch.inference_mode():
            model(**given)
    finally:
        model.eval()
    with torch.inference_mode():
        short = model(**inputs(2, 32)).last_hidden_state  # 64 tokens
    assert torch.equal(short, eager(model, **inputs(2, 32)))
    assert answered == []


def test_weights_edited_in_place_show_in_the_next_compiled_batch(counted):
    """The weights stay inputs of the graph (no freezing): a model trained or edited in place is never stale."""
    model, answered = counted
    given = inputs(seed=3)
    weight = model.encoder.layer[0].intermediate.dense.weight
    before = weight.detach().clone()
    try:
        with torch.no_grad():
            weight.mul_(-2.0)
        with torch.inference_mode():
            out = model(**given).last_hidden_state
        torch.testing.assert_close(out, eager(model, **given), rtol=0, atol=1e-5)
        assert answered == [640]
    finally:
        with torch.no_grad():
            weight.copy_(before)


def test_a_failed_compile_warns_once_and_the_layers_run_eagerly_from_then_on(monkeypatch):
    def broken(*args, **kwargs):
        def graph(*args, **kwargs):
            raise RuntimeError("C++ compile error: no such header\nmore lines")
        return graph

    monkeypatch.setattr(compiled_layers.torch, "compile", broken)
    model = BERT(tiny_config()).eval()
    model.set_backend(compiled=True)
    given = inputs()
    with pytest.warns(RuntimeWarning, match=r"the compiled encoder failed, so this model's layers run eagerly from "
                                            r"now on \(RuntimeError: C\+\+ compile error: no such header\)"):
        with torch.inference_mode():
            first = model(**given).last_hidden_state
    torch.testing.assert_close(first, eager(model, **given), rtol=0, atol=0)
    with warnings.catch_warnings(record=True) as later, torch.inference_mode():
        warnings.simplefilter("always")
        model(**given)
    assert later == []
    assert compiled_layers.failure(model.encoder.layer) == "RuntimeError: C++ compile error: no such header"


def test_compiled_is_asked_per_model_and_follows_moves_copies_and_blocks():
    one, other = BERT(tiny_config()), BERT(tiny_config())
    one.set_backend(compiled=True)
    assert isinstance(one.encoder.compiled_backend, kernels.CompiledLayers)
    assert other.encoder.compiled_backend is None
    assert isinstance(copy.deepcopy(one).encoder.compiled_backend, kernels.CompiledLayers)
    assert one.to(torch.bfloat16).encoder.compiled_backend is None  # fp32 only
    assert one.float().encoder.compiled_backend is not None
    with kernels.override(other, compiled=True):
        assert other.encoder.compiled_backend is not None
    assert other.encoder.compiled_backend is None
    with kernels.disabled(one):
        assert one.encoder.compiled_backend is None
    one.set_backend(compiled=False)
    assert one.encoder.compiled_backend is None


def test_without_a_cpp_compiler_asking_for_it_is_one_line_saying_so(monkeypatch):
    monkeypatch.setenv("CXX", "/nowhere/c++")
    with pytest.raises(ValueError, match=r"^compiled=True cannot run here: torch.compile's CPU code needs a C\+\+ "
                                         r"compiler and there is none \(/nowhere/c\+\+ not found; set CXX\)\.$"):
        BERT(tiny_config()).set_backend(compiled=True)
