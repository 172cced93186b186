"""The rules that decide when the fast inference paths may stand in for plain modules, and the CPU path itself
(the GPU paths need CUDA: tests/test_accelerators.py runs them)."""

from __future__ import annotations

import copy
import pickle
import weakref
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from system_programs import require_avx2_kernels
from tiny_models import tiny_config
from torch import nn

from bertviz_lab import kernels
from bertviz_lab.kernels import avx2, build, choice, layer_norm, linear, rules
from bertviz_lab.model import BERT, BERTForMaskedLM

# large enough that every linear layer reaches the packed GEMMs (linear.MIN_PACKED_WORK) at 64 tokens
PACKED_SIZES = dict(vocab_size=200, hidden_size=128, intermediate_size=512, max_position_embeddings=128)


@pytest.fixture(params=["avx2", "onednn", "mkl"])
def backend(request) -> Iterator[str]:
    """Each packed CPU GEMM in turn, where this machine can run it."""
    if request.param == "avx2":
        require_avx2_kernels()
    if request.param == "onednn" and not choice.ONEDNN_PACKING:
        pytest.skip("oneDNN's packed GEMM needs an x86 CPU with oneDNN")
    if request.param == "mkl" and not choice.MKL_PACKING:
        pytest.skip("MKL's packed GEMM needs an x86 CPU and a PyTorch with MKL and oneDNN")
    with kernels.override(cpu_gemm=request.param):
        yield request.param


def test_disabled_restores_the_rules_after_an_error():
    before = choice.current_rules()
    with pytest.raises(RuntimeError), kernels.disabled():
        assert not choice.current_rules().on
        raise RuntimeError("inside")
    assert choice.current_rules() == before


def test_the_gpu_paths_are_never_given_for_cpu_weights_nor_take_cpu_tensors():
    cpu = torch.device("cpu")
    assert choice.add_layer_norm_backend_name(cpu, torch.float32) in (None, "avx2")
    assert choice.add_layer_norm_backend_name(cpu, torch.bfloat16) is None
    assert choice.gelu_backend_name(cpu, torch.float32, "tanh") is None
    assert choice.gelu_backend_name(cpu, torch.bfloat16, "erf") is None
    x, weight, bias = torch.randn(2, 3, 8), torch.randn(8, 8), torch.randn(8)
    with torch.inference_mode():
        assert layer_norm.TRITON(x, x, torch.ones(8), torch.zeros(8), 1e-12) is None
        assert linear.gelu_backend("cublaslt")(x, weight, bias) is None


def _packed_linear() -> tuple[nn.Linear, torch.Tensor]:
    """A layer and input big enough for the packed path: 128 rows x 384 -> 1152 (MiniLM's QKV at batch 1)."""
    torch.manual_seed(0)
    return nn.Linear(384, 1152), torch.randn(2, 64, 384)


def test_cpu_inference_runs_on_a_packed_weight_and_equals_nn_linear(backend):
    layer, x = _packed_linear()
    gemm = linear.packed_linear(backend)
    with torch.inference_mode():
        y = gemm(x, layer.weight, layer.bias)
        assert linear.has_packed_copy(layer.weight) == backend
        torch.testing.assert_close(y, F.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)
        strided = torch.randn(64, 2, 384).transpose(0, 1)  # not contiguous
        torch.testing.assert_close(gemm(strided, layer.weight, layer.bias), F.linear(strided, layer.weight, layer.bias),
                                   rtol=1e-5, atol=1e-5)


def test_the_packed_weight_follows_in_place_changes_and_reloads(backend):
    layer, x = _packed_linear()
    gemm = linear.packed_linear(backend)
    with torch.no_grad():
        gemm(x, layer.weight, layer.bias)
        layer.weight.mul_(-2.0)
        torch.testing.assert_close(gemm(x, layer.weight, layer.bias), F.linear(x, layer.weight, layer.bias),
                                   rtol=1e-5, atol=1e-5)
        other = nn.Linear(384, 1152)
        layer.load_state_dict(other.state_dict())
        torch.testing.assert_close(gemm(x, layer.weight, layer.bias), F.linear(x, other.weight, other.bias),
                                   rtol=1e-5, atol=1e-5)


def test_autograd_and_small_products_stand_aside_and_training_drops_the_packed_copy(backend):
    layer, x = _packed_linear()
    gemm = linear.packed_linear(backend)
    with torch.inference_mode():
        gemm(x, layer.weight, layer.bias)
        small = nn.Linear(8, 8)
        assert gemm(torch.randn(2, 3, 8), small.weight, small.bias) is None  # addmm's lighter call is faster
        assert linear.has_packed_copy(small.weight) is None
    assert linear.has_packed_copy(layer.weight) == backend
    assert gemm(x, layer.weight, layer.bias) is None  # autograd: the layer's own nn.Linear
    assert linear.has_packed_copy(layer.weight) is None
    weak, key = weakref.ref(layer.weight), id(layer.weight)
    with torch.inference_mode():
        gemm(x, layer.weight, layer.bias)
    assert key in linear._packed
    del layer
    assert weak() is None and key not in linear._packed  # a freed weight takes its copy with it


def test_the_model_keeps_plain_modules_and_is_given_its_backends_once(monkeypatch):
    model = BERTForMaskedLM(tiny_config(**PACKED_SIZES)).eval()
    assert {type(m) for m in model.modules() if isinstance(m, nn.Linear)} == {nn.Linear}
    layer = model.bert.encoder.layer[0]
    given = (layer.attention.self.attention_backend, layer.attention.self.linear_backend,
             layer.intermediate.gelu_backend, layer.output.linear_backend, layer.output.add_layer_norm_backend)

    def no_choice_per_call(*args):
        raise AssertionError("a backend was chosen during a forward")

    for rule in ("attention_backend_name", "linear_backend_name", "gelu_backend_name", "add_layer_norm_backend_name",
                 "cpu_backend"):
        monkeypatch.setattr(choice, rule, no_choice_per_call)
    with torch.inference_mode():
        model(input_ids=torch.randint(5, 200, (2, 64)))
        with model.hooks([("bert.encoder.layer.0.attention.self.probs", lambda probs, point: None)]):
            model(input_ids=torch.randint(5, 200, (2, 64)))
    assert given == (layer.attention.self.attention_backend, layer.attention.self.linear_backend,
                     layer.intermediate.gelu_backend, layer.output.linear_backend,
                     layer.output.add_layer_norm_backend)
    with pytest.raises(AssertionError, match="chosen during"):
        model.double()  # moved or cast: chosen again


def test_models_with_packed_weights_copy_and_pickle(backend):
    model = BERTForMaskedLM(tiny_config(**PACKED_SIZES)).eval()
    ids = torch.randint(5, model.config.vocab_size, (2, 64))
    decoder = model.cls.predictions.decoder
    with torch.inference_mode():
        logits = model(input_ids=ids)
        assert linear.has_packed_copy(decoder.weight) == backend
    twin, unpickled = copy.deepcopy(model), pickle.loads(pickle.dumps(model))
    with torch.inference_mode():
        torch.testing.assert_close(twin(input_ids=ids), logits)
        torch.testing.assert_close(unpickled(input_ids=ids), logits)
        assert linear.has_packed_copy(twin.cls.predictions.decoder.weight) == backend
        inference_twin = copy.deepcopy(model)  # inference tensors: no version counter, so no packed copy
        torch.testing.assert_close(inference_twin(input_ids=ids), logits)
        assert linear.has_packed_copy(inference_twin.cls.predictions.decoder.weight) is None
    model.double()  # the copies of weights that moved or changed dtype are dropped
    assert linear.has_packed_copy(decoder.weight) is None


def test_a_model_on_packed_weights_matches_plain_pytorch(backend):
    model = BERT(tiny_config(**PACKED_SIZES)).eval()
    ids = torch.randint(5, 200, (2, 64), generator=torch.Generator().manual_seed(0))  # ids <= 20 are masked out
    attention = {layer.attention.self.attention_backend.name for layer in model.encoder.layer}
    assert attention == {"avx2" if backend == "avx2" else "sdpa"}  # the kernel's attention comes with its GEMM
    assert {layer.output.linear_backend.name for layer in model.encoder.layer} == {backend}
    with torch.inference_mode():
        packed = model(input_ids=ids, attention_mask=(ids > 20).long())
        assert linear.has_packed_copy(model.encoder.layer[0].intermediate.dense.weight) == backend
        with kernels.disabled(model):
            assert {layer.attention.self.attention_backend.name for layer in model.encoder.layer} == {"sdpa"}
            assert {layer.output.linear_backend for layer in model.encoder.layer} == {None}
            plain = model(input_ids=ids, attention_mask=(ids > 20).long())
        # switching the fast paths off for a comparison keeps the packed copies
        assert linear.has_packed_copy(model.encoder.layer[0].intermediate.dense.weight) == backend
    torch.testing.assert_close(packed.last_hidden_state, plain.last_hidden_state, rtol=0, atol=1e-5)
    torch.testing.assert_close(packed.pooler_output, plain.pooler_output, rtol=0, atol=1e-5)


def test_a_hooked_linear_layer_runs_as_a_module_on_the_packed_gemm(backend):
    """Hooks on an nn.Linear see it called (a trace recording module calls); its product is the packed GEMM's, so
    the output is bit for bit the unhooked one, and a hook's replacement is what the model goes on with."""
    model = BERT(tiny_config(**PACKED_SIZES)).eval()
    ids = torch.randint(5, 200, (2, 64), generator=torch.Generator().manual_seed(0))
    qkv = model.encoder.layer[0].attention.self.qkv
    seen = []
    with torch.inference_mode():
        plain = model(input_ids=ids).last_hidden_state
        handle = qkv.register_forward_hook(lambda module, args, output: seen.append((module, output.clone())))
        hooked = model(input_ids=ids).last_hidden_state
        handle.remove()
        handle = qkv.register_forward_hook(lambda module, args, output: torch.zeros_like(output))
        silenced = model(input_ids=ids).last_hidden_state
        handle.remove()
        after = model(input_ids=ids).last_hidden_state
    assert seen[0][0] is qkv and type(qkv) is nn.Linear and "forward" not in vars(qkv)
    torch.testing.assert_close(seen[0][1], F.linear(model.embeddings(ids), qkv.weight, qkv.bias), rtol=0, atol=1e-5)
    assert torch.equal(hooked, plain) and torch.equal(after, plain)
    assert (silenced - plain).abs().max() > 1e-2


def test_a_packed_copy_from_another_backend_is_replaced():
    if build.library() is None or not choice.ONEDNN_PACKING:
        pytest.skip("needs both packed CPU GEMMs")
    layer, x = _packed_linear()
    expected = F.linear(x, layer.weight, layer.bias)
    with torch.inference_mode():
        for backend in ("onednn", "avx2"):
            torch.testing.assert_close(linear.packed_linear(backend)(x, layer.weight, layer.bias), expected,
                                       rtol=1e-5, atol=1e-5)
            assert backend in linear.has_packed_copy(layer.weight).split("+")  # each layout kept beside the others


def test_the_cpu_gemm_can_be_chosen_by_environment(monkeypatch):
    monkeypatch.setenv("BERTVIZ_LAB_CPU_GEMM", "off")
    assert choice.cpu_gemm_from_environment() is None
    monkeypatch.setenv("BERTVIZ_LAB_CPU_GEMM", "onednn")
    assert choice.cpu_gemm_from_environment() == ("onednn" if choice.ONEDNN_PACKING else None)
    monkeypatch.setenv("BERTVIZ_LAB_CPU_GEMM", "mkl")
    assert choice.cpu_gemm_from_environment() == ("mkl" if choice.MKL_PACKING else None)
    monkeypatch.setenv("BERTVIZ_LAB_CPU_GEMM", "blas")
    with pytest.raises(ValueError, match="BERTVIZ_LAB_CPU_GEMM='blas': use auto, avx2, onednn, mkl or off"):
        choice.cpu_gemm_from_environment()


def test_override_names_what_it_cannot_do_and_restores_the_choice_after_an_error():
    with pytest.raises(ValueError, match="attention='flash': use one of eager, sdpa, avx2 or 'auto'"):
        with kernels.override(attention="flash"):
            pass
    with pytest.raises(ValueError, match="cpu_gemm='blas': use avx2, onednn, mkl, off or 'auto'"):
        with kernels.override(cpu_gemm="blas"):
            pass
    model = BERT(tiny_config())
    before = model.encoder.layer[0].attention.self.attention_backend
    with pytest.raises(RuntimeError), kernels.override(model, attention="eager"):
        assert model.encoder.layer[0].attention.self.attention_backend is None
        raise RuntimeError("inside")
    assert model.encoder.layer[0].attention.self.attention_backend is before
    model.set_backend(attention="eager")  # for good, and copies keep it
    copies = [copy.deepcopy(model), pickle.loads(pickle.dumps(model))]
    assert all(twin.encoder.layer[1].attention.self.attention_backend is None for twin in copies)
    model.set_backend(attention="auto")
    assert model.encoder.layer[1].attention.self.attention_backend is before


def test_a_models_backend_is_its_own_and_no_call_rewires_another_model():
    """set_backend and override on one model leave every other model as it was; override without a model sets the
    rules of the models built inside the block, and no live model is chosen for again."""
    first, second = BERT(tiny_config()), BERT(tiny_config())
    chosen = second.encoder.layer[0].attention.self.attention_backend
    first.set_backend(attention="eager")
    assert first.encoder.layer[0].attention.self.attention_backend is None
    assert second.encoder.layer[0].attention.self.attention_backend is chosen
    with kernels.override(attention="eager"):
        assert second.encoder.layer[0].attention.self.attention_backend is chosen  # live: left alone
        built = BERT(tiny_config())
    assert built.encoder.layer[0].attention.self.attention_backend is None  # built in the block: keeps its rules
    assert choice.rules_of(built).attention == "eager" and choice.rules_of(second).attention is None
    with kernels.disabled(second):
        assert first.encoder.layer[0].attention.self.attention_backend is None
    assert second.encoder.layer[0].attention.self.attention_backend is chosen


def test_an_override_on_a_task_model_gives_its_backbone_back_its_own_rules():
    """The backbone's own set_backend outlives a block that overrides the whole task model."""
    model = BERTForMaskedLM(tiny_config())
    model.bert.set_backend(attention="eager")
    with kernels.override(model, attention="sdpa"):
        assert model.bert.encoder.layer[0].attention.self.attention_backend.name == "sdpa"
    assert choice.rules_of(model.bert).attention == "eager"
    assert model.bert.encoder.layer[0].attention.self.attention_backend is None
    assert choice.rules_of(model).attention is None
    model.float()  # the task model moved or cast: chosen again, the backbone by its own rules
    assert model.bert.encoder.layer[0].attention.self.attention_backend is None


def test_attention_is_chosen_once_per_device_dtype_and_head_size():
    cpu, fp32 = torch.device("cpu"), torch.float32
    with kernels.override(attention="sdpa"):
        assert choice.attention_backend_name(cpu, fp32, 32) == "sdpa"
    with kernels.override(attention="eager"):
        assert choice.attention_backend_name(cpu, fp32, 32) == "eager"
    if build.library() is None:
        return
    with kernels.override(attention="avx2"):
        assert choice.attention_backend_name(cpu, fp32, 32) == "avx2"
        assert choice.attention_backend_name(cpu, fp32, 8) == "sdpa"  # the kernel needs a multiple of 16
        assert choice.attention_backend_name(cpu, torch.float64, 32) == "sdpa"
        assert choice.attention_backend_name(torch.device("cuda"), fp32, 32) == "sdpa"
        model = BERT(tiny_config())
    assert model.encoder.layer[0].attention.self.attention_backend.name == "avx2"
    model.double()  # moved or cast: chosen again, by its rules
    assert model.encoder.layer[0].attention.self.attention_backend.name == "sdpa"
    model.float()
    assert model.encoder.layer[0].attention.self.attention_backend.name == "avx2"
    with kernels.disabled(model):  # plain PyTorch, whatever its rules asked for
        assert model.encoder.layer[0].attention.self.attention_backend.name == "sdpa"
    assert model.encoder.layer[0].attention.self.attention_backend.name == "avx2"


def test_the_avx2_backend_hands_autograd_and_dropout_to_sdpa():
    require_avx2_kernels()
    backend = kernels.attention.backend("avx2")
    q, k, v = (torch.randn(1, 2, 5, 32) for _ in range(3))
    mask = torch.zeros(1, 1, 1, 5)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.25)
    with torch.inference_mode():
        torch.testing.assert_close(backend(q, k, v, mask, 0.25), sdpa, rtol=0, atol=1e-5)
    assert torch.equal(backend(q, k, v, mask, 0.25), sdpa)  # autograd on: SDPA's
    torch.manual_seed(0)
    with torch.inference_mode():
        dropped = backend(q, k, v, mask, 0.25, 0.5)
    torch.manual_seed(0)
    with torch.inference_mode():
        assert torch.equal(dropped, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.5,
                                                                   scale=0.25))


def test_the_gelu_epilogue_is_given_for_gelu_models_and_a_hooked_dense_keeps_its_bits():
    require_avx2_kernels()
    cpu, fp32 = torch.device("cpu"), torch.float32
    with kernels.override(cpu_gemm="avx2"):
        assert choice.gelu_backend_name(cpu, fp32, "erf") == "avx2"
        assert choice.gelu_backend_name(cpu, fp32, "tanh") is None  # the tanh form: PyTorch's own
        assert choice.gelu_backend_name(cpu, fp32, None) is None  # another activation: the model's own
        assert BERT(tiny_config(hidden_act="relu")).encoder.layer[0].intermediate.gelu_backend is None
        model = BERT(tiny_config(**PACKED_SIZES)).eval()
        intermediate = model.encoder.layer[0].intermediate
        assert intermediate.gelu_backend.name == "avx2"
        x = torch.randn(2, 64, 128)
        with torch.inference_mode():
            fused = intermediate(x)
            seen = []  # a hook sees the output before GELU, and the result is bit for bit the fused one
            handle = intermediate.dense.register_forward_hook(lambda module, args, output: seen.append(output.clone()))
            hooked = intermediate(x)
            handle.remove()
        dense = intermediate.dense
        torch.testing.assert_close(seen[0], F.linear(x, dense.weight, dense.bias), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(fused, F.gelu(F.linear(x, dense.weight, dense.bias)), rtol=1e-5, atol=1e-5)
        assert torch.equal(hooked, fused) and not torch.equal(seen[0], hooked)
    if choice.ONEDNN_PACKING:
        with kernels.override(model, cpu_gemm="onednn"):
            assert intermediate.gelu_backend is None


@pytest.mark.usefixtures("avx2_forced")
def test_the_output_layer_adds_and_normalises_in_one_pass_on_the_cpu_and_a_hooked_one_gives_the_same_bits():
    """The residual add + LayerNorm of an output layer: avx2.c's one pass for fp32 CPU inference (the Triton kernel
    is never given to CPU weights), within 1e-5 of PyTorch's LayerNorm of the sum; with a hook on the LayerNorm, the
    hook sees the sum and the output is bit for bit the unhooked one; training and `disabled()` take nn.LayerNorm."""
    model = BERT(tiny_config(hidden_dropout_prob=0.0)).eval()
    output = model.encoder.layer[0].output
    assert output.add_layer_norm_backend is layer_norm.AVX2
    y, residual = torch.randn(2, 5, model.config.intermediate_size), torch.randn(2, 5, model.config.hidden_size)
    norm = output.LayerNorm

    def reference() -> torch.Tensor:
        return F.layer_norm(F.linear(y, output.dense.weight, output.dense.bias) + residual,
                            (model.config.hidden_size,), norm.weight, norm.bias, norm.eps)

    with torch.inference_mode():
        fused = output(y, residual)
        torch.testing.assert_close(fused, reference(), rtol=0, atol=1e-5)
        seen = []
        handle = norm.register_forward_hook(lambda module, args, out: seen.append((args[0].clone(), out.clone())))
        try:
            hooked = output(y, residual)
        finally:
            handle.remove()
        assert torch.equal(hooked, fused) and torch.equal(seen[0][1], fused)
        summed = F.linear(y, output.dense.weight, output.dense.bias) + residual
        torch.testing.assert_close(seen[0][0], summed, rtol=0, atol=1e-5)
    assert torch.equal(output(y, residual), reference())  # autograd records it: PyTorch's own modules
    with kernels.disabled(output):
        assert output.add_layer_norm_backend is None
        with torch.inference_mode():
            torch.testing.assert_close(output(y, residual), reference(), rtol=0, atol=1e-5)


def test_the_cpu_layer_norm_kernel_matches_float64_for_any_width():
    """avx2.c's add + LayerNorm against float64 arithmetic: widths with and without a tail of 8, rows on one thread
    and on several, with and without the residual, and one row of NaN that stays in its row."""
    require_avx2_kernels()
    torch.manual_seed(0)
    for width, rows in ((1, 3), (5, 7), (8, 1), (13, 40), (384, 300), (768, 2)):
        x, residual = torch.randn(rows, width) * 3 + 1, torch.randn(rows, width)
        weight, bias = torch.randn(width), torch.randn(width)
        for added in (residual, None):
            total = x.double() if added is None else x.double() + added.double()
            want = F.layer_norm(total, (width,), weight.double(), bias.double(), 1e-12)
            got = avx2.add_layer_norm(x, added, weight, bias, 1e-12)
            assert got.shape == x.shape and got.dtype == torch.float32
            assert (got.double() - want).abs().max() <= 2e-5 * max(1.0, want.abs().max().item())
    x, residual = torch.randn(6, 384), torch.randn(6, 384)
    x[3, 5] = float("nan")
    got = avx2.add_layer_norm(x, residual, torch.ones(384), torch.zeros(384), 1e-12)
    assert got[3].isnan().all() and not got[[0, 1, 2, 4, 5]].isnan().any()


@pytest.fixture
def kernel_attention() -> Iterator[tuple[BERT, torch.Tensor, nn.Module]]:
    """(tiny model on the AVX2 kernels, input ids, its first layer's probs point)."""
    require_avx2_kernels()
    with kernels.override(attention="avx2"):
        model = BERT(tiny_config(num_attention_heads=2, max_position_embeddings=64)).eval()
        yield model, torch.randint(5, model.config.vocab_size, (2, 40)), model.encoder.layer[0].attention.self.probs


def test_watched_attention_on_the_cpu_kernel_feeds_hooks_and_obeys_them(kernel_attention):
    model, ids, point = kernel_attention
    seen = []
    with torch.inference_mode():
        plain = model(input_ids=ids).last_hidden_state
        handle = point.register_forward_hook(lambda module, args, output: seen.append(output.clone()))
        watched = model(input_ids=ids).last_hidden_state
        handle.remove()
        handle = point.register_forward_hook(lambda module, args, output: torch.zeros_like(output))
        silenced = model(input_ids=ids).last_hidden_state
        handle.remove()
    assert seen[0].shape == (2, 2, 40, 40)
    torch.testing.assert_close(seen[0].sum(-1), torch.ones(2, 2, 40), rtol=0, atol=1e-6)
    torch.testing.assert_close(watched, plain, rtol=0, atol=1e-5)
    assert (silenced - plain).abs().max() > 1e-2  # a hook's replacement is what the layer goes on with


def test_a_watched_probs_point_runs_the_plain_path_and_in_place_changes_are_obeyed(kernel_attention):
    """A hook on the probabilities (a trace, a cache) makes its layer write the attention out: the probabilities
    it sees are softmax's, the output within float32 rounding of the kernel's, and a change it makes in place is
    what the layer goes on with."""
    model, ids, point = kernel_attention
    seen = []
    with torch.inference_mode():
        plain = model(input_ids=ids).last_hidden_state
        handle = point.add_hook(lambda output, point: seen.append(output.clone()))
        observed = model(input_ids=ids).last_hidden_state
        zeroing = point.register_forward_hook(lambda module, args, output: output.zero_())
        changed = model(input_ids=ids).last_hidden_state
        zeroing.remove()
        handle.remove()
    torch.testing.assert_close(observed, plain, rtol=0, atol=1e-5)
    torch.testing.assert_close(seen[0].sum(-1), torch.ones(2, 2, 40), rtol=0, atol=1e-6)
    assert (changed - plain).abs().max() > 1e-2


def test_entropy_is_the_kernel_where_it_runs_and_torch_elsewhere_with_the_same_values(monkeypatch):
    p = torch.softmax(torch.randn(2, 3, 9, 9, generator=torch.Generator().manual_seed(0)), dim=-1)
    exact = torch.special.entr(p.double()).sum(-1)
    calls = []
    monkeypatch.setattr(avx2, "entropy", lambda x: calls.append(x.shape) or torch.special.entr(x).sum(-1))
    assert (kernels.entropy(p) - exact).abs().max() <= 1e-6
    assert calls == ([p.shape] if build.library() is not None else [])
    calls.clear()
    with kernels.disabled():
        assert (kernels.entropy(p) - exact).abs().max() <= 1e-6
    assert (kernels.entropy(p.double()) - exact).abs().max() <= 1e-12
    assert (kernels.entropy(p.requires_grad_()) - exact).abs().max() <= 1e-6  # autograd: torch's
    assert calls == []


def test_a_cpu_with_avx512_gets_mkl_and_sdpa_unless_avx2_is_asked_for(monkeypatch):
    monkeypatch.delenv("BERTVIZ_LAB_CPU_GEMM", raising=False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert choice.wider_vectors_than_avx2()
    assert choice.cpu_gemm_from_environment() == ("mkl" if choice.MKL_PACKING else
                                                  "onednn" if choice.ONEDNN_PACKING else None)
    with choice.override(cpu_gemm="onednn" if choice.ONEDNN_PACKING else "off"):
        assert choice.attention_backend_name(torch.device("cpu"), torch.float32, 32) == "sdpa"
        assert choice.gelu_backend_name(torch.device("cpu"), torch.float32, "erf") is None
        assert "PyTorch's own kernels use AVX512 here" in str(kernels.status())
    monkeypatch.setenv("BERTVIZ_LAB_CPU_GEMM", "avx2")
    assert choice.cpu_gemm_from_environment() == ("avx2" if build.library() is not None else None)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setenv("BERTVIZ_LAB_CPU_GEMM", "auto")
    assert not choice.wider_vectors_than_avx2()
    assert choice.cpu_gemm_from_environment() == ("avx2" if build.library() is not None else
                                                  "onednn" if choice.ONEDNN_PACKING else None)


def test_the_reductions_over_attention_run_on_the_kernels_for_fp32_cpu_tensors_only(monkeypatch):
    """`cpu_reductions` is the one rule for kernels.entropy and kernels.attention_statistics: each follows it, and
    its PyTorch path gives the same numbers."""
    require_avx2_kernels()
    cpu = torch.device("cpu")
    assert choice.cpu_reductions(cpu, torch.float32)
    assert not choice.cpu_reductions(cpu, torch.float64) and not choice.cpu_reductions(cpu, torch.bfloat16)
    assert not choice.cpu_reductions(torch.device("meta"), torch.float32)
    with kernels.disabled():
        assert not choice.cpu_reductions(cpu, torch.float32)
    p = torch.softmax(torch.randn(3, 4, 9), -1)
    calls = []
    monkeypatch.setattr(avx2, "entropy", lambda x, kernel=avx2.entropy: calls.append(x) or kernel(x))
    fast = kernels.entropy(p)
    monkeypatch.setattr(rules, "cpu_reductions", lambda device, dtype: False)
    plain = kernels.entropy(p)
    assert len(calls) == 1 and torch.allclose(fast, plain, atol=1e-6)


def test_the_mkl_gemm_takes_a_short_texts_rows_and_hands_the_others_to_onednn_or_addmm():
    """MKL's packed GEMM for MKL_MIN_ROWS to MKL_MAX_ROWS rows; other row counts go to oneDNN's packed GEMM (faster
    there), more than MAX_ONEDNN_ROWS to addmm; each equals nn.Linear."""
    if not choice.MKL_PACKING:
        pytest.skip("MKL's packed GEMM needs an x86 CPU and a PyTorch with MKL and oneDNN")
    gemm = linear.packed_linear("mkl")
    torch.manual_seed(0)
    for rows, layout in ((linear.MKL_MIN_ROWS, "mkl"), (linear.MKL_MAX_ROWS, "mkl"),
                         (linear.MKL_MIN_ROWS - 1, "onednn"), (linear.MKL_MAX_ROWS + 1, "onednn"),
                         (linear.MAX_ONEDNN_ROWS + 1, None)):
        layer, x = nn.Linear(384, 1152), torch.randn(rows, 384)  # made outside inference mode, as a model is
        with torch.inference_mode():
            y = gemm(x, layer.weight, layer.bias)
            assert linear.has_packed_copy(layer.weight) == layout, rows
            if layout is None:
                assert y is None  # the layer's own nn.Linear
            else:
                torch.testing.assert_close(y, F.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)
