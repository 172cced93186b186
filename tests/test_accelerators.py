"""The model, traces, decoding, training and the device picker on each accelerator this machine has (CUDA, MPS).

Without one these tests are skipped. BERTVIZ_LAB_TEST_ACCELERATOR=cpu runs them on the CPU instead, which checks the
tests themselves on a machine without a GPU.
"""

from __future__ import annotations

import math
import os
from unittest import mock

import pytest
import torch

from bertviz_lab import kernels
from bertviz_lab.device import available_devices
from bertviz_lab.kernels import choice, layer_norm, linear
from bertviz_lab.model import (
    BERT,
    BERT_Weights,
    BERTConfig,
    BERTForCausalLM,
    BERTForPreTraining,
    BERTTokenizerFast,
    DynamicCache,
)
from bertviz_lab.trace import trace
from bertviz_lab.train import TrainConfig, Trainer, generate_synthetic_bert_batches, synthetic_to_training_batch

ACCELERATORS = ([os.environ["BERTVIZ_LAB_TEST_ACCELERATOR"]] if os.environ.get("BERTVIZ_LAB_TEST_ACCELERATOR")
                else [name for name in available_devices() if name != "cpu"])
pytestmark = pytest.mark.skipif(not ACCELERATORS, reason="no CUDA or MPS device on this machine")
TEXTS = ["The cat sat on the mat because it was warm.", "Paris is the capital of France, and it is beautiful."]


@pytest.fixture(params=ACCELERATORS or ["none"])
def device(request) -> torch.device:
    return torch.device(request.param)


@pytest.fixture(scope="module")
def minilm():
    return BERT.from_pretrained(BERT_Weights.DEFAULT.path), BERTTokenizerFast.from_pretrained(BERT_Weights.DEFAULT.path)


def batch(tokenizer, device: torch.device) -> dict[str, torch.Tensor]:
    encoded = tokenizer.batch_encode_plus(TEXTS, padding=True, return_tensors="pt")
    return {k: encoded[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids")}


def test_fp32_forward_matches_the_cpu(minilm, device):
    model, tokenizer = minilm
    inputs = batch(tokenizer, torch.device("cpu"))
    with torch.inference_mode():
        want = model(**inputs).last_hidden_state
        moved = BERT.from_pretrained(BERT_Weights.DEFAULT.path, device=device)
        got = moved(**{k: v.to(device) for k, v in inputs.items()}).last_hidden_state
    assert got.device.type == device.type
    assert (got.cpu() - want).abs().max().item() <= 1e-4


def test_bf16_is_as_close_to_fp32_as_transformers_bf16(minilm, device):
    if device.type == "cpu":
        pytest.skip("bf16 matmuls on the CPU say nothing about an accelerator")
    transformers = pytest.importorskip("transformers")
    _, tokenizer = minilm
    path = str(BERT_Weights.DEFAULT.path)
    inputs = batch(tokenizer, device)
    keep = inputs["attention_mask"].bool()
    with torch.inference_mode():
        reference = transformers.BertModel.from_pretrained(path, attn_implementation="sdpa").to(device).eval()
        exact = reference(**inputs).last_hidden_state[keep].float()
        theirs = reference.to(torch.bfloat16)(**inputs).last_hidden_state[keep].float()
        ours = BERT.from_pretrained(path, device=device).to(torch.bfloat16)(**inputs).last_hidden_state[keep].float()
    our_error, their_error = (ours - exact).abs().max().item(), (theirs - exact).abs().max().item()
    assert our_error <= 1.5 * their_error + 1e-3, (our_error, their_error)


def test_trace_on_the_device_keeps_cpu_copies_equal_to_the_cpu_trace(minilm, device):
    model, tokenizer = minilm
    inputs = batch(tokenizer, torch.device("cpu"))
    with torch.inference_mode(), trace(model, attentions=True, hidden_states=True) as on_cpu:
        model(**inputs)
    moved = BERT.from_pretrained(BERT_Weights.DEFAULT.path, device=device)
    with torch.inference_mode(), trace(moved, attentions=True, hidden_states=True) as on_device:
        moved(**{k: v.to(device) for k, v in inputs.items()})
    assert len(on_device.attentions) == 6 and all(a.device.type == "cpu" for a in on_device.attentions)
    for got, want in zip(on_device.attentions + on_device.hidden_states, on_cpu.attentions + on_cpu.hidden_states):
        assert (got - want).abs().max().item() <= 1e-4


def test_incremental_decoding_equals_full_decoding(device):
    torch.manual_seed(0)
    model = BERTForCausalLM(BERTConfig.tiny(vocab_size=100, is_decoder=True)).to(device).eval()
    input_ids = torch.randint(1, 100, (2, 9), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.inference_mode():
        full = model.bert(input_ids, use_cache=False).last_hidden_state
        cache = DynamicCache()
        steps = [model.bert(input_ids[:, t:t + 1], past_key_values=cache, use_cache=True).last_hidden_state
                 for t in range(input_ids.shape[1])]
    assert cache.keys[0].device.type == device.type
    assert (torch.cat(steps, dim=1) - full).abs().max().item() <= 1e-4


def test_trainer_runs_and_resumes_on_the_device(tmp_path, device):
    def trainer(max_steps: int) -> Trainer:
        torch.manual_seed(0)
        model = BERTForPreTraining(BERTConfig.tiny(vocab_size=200, hidden_dropout_prob=0.0,
                                                   attention_probs_dropout_prob=0.0))
        batches = [synthetic_to_training_batch(b)
                   for b in generate_synthetic_bert_batches(4, 8, 16, 200, random_seed=0)]
        config = TrainConfig(max_steps=max_steps, batch_size=8, progress=False, device=str(device), log_interval=0,
                             precision="auto", checkpoint_dir=str(tmp_path / "run"), checkpoint_interval=2)
        return Trainer(model, batches, batches[:1], config)

    first = trainer(4)
    first.fit(2)
    assert next(first.model.parameters()).device.type == device.type
    resumed = trainer(4)
    resumed.load_checkpoint(tmp_path / "run")
    assert resumed.step == 2
    records = resumed.fit()
    assert [r.step for r in records] == [3, 4]
    assert all(math.isfinite(r.train_loss) for r in records)


def test_device_picker_moves_the_model_and_reports_it(device):
    from bertviz_lab.widgets import DevicePicker

    model = BERT(BERTConfig.tiny(vocab_size=100))
    moved_to = []
    picker = DevicePicker(model, on_change=moved_to.append)
    name = str(device) if device.index is not None or device.type != "cuda" else "cuda:0"
    assert name in picker.available
    picker.move_to(name)
    assert next(model.parameters()).device.type == device.type and picker.device.type == device.type
    assert moved_to and moved_to[-1].type == device.type


def _spy(module, name: str):
    """Count the calls to `module.name` while it still runs."""
    return mock.patch.object(module, name, wraps=getattr(module, name))


def test_fused_gpu_paths_are_taken_and_match_plain_pytorch(minilm, device, monkeypatch):
    if device.type != "cuda" or choice.triton is None:
        pytest.skip("the fused paths run on CUDA with Triton")
    _, tokenizer = minilm
    inputs = batch(tokenizer, device)
    model = BERT.from_pretrained(BERT_Weights.DEFAULT.path, device=device).eval()
    with torch.inference_mode(), _spy(layer_norm, "triton_add_layer_norm") as norms:
        model(**inputs)
    assert norms.call_count == 0  # two short sentences: the host is the bottleneck, plain PyTorch is faster
    monkeypatch.setattr(layer_norm, "MIN_FUSED_ELEMENTS", 0)
    with torch.inference_mode(), _spy(layer_norm, "triton_add_layer_norm") as norms:
        got = model(**inputs).last_hidden_state
        with kernels.disabled():
            want = model(**inputs).last_hidden_state
    assert norms.call_count == 2 * model.config.num_hidden_layers  # after attention and after the MLP, per layer
    assert (got - want).abs().max().item() <= 1e-5  # fp32: the same function, summed in another order
    half = model.to(torch.bfloat16)
    with torch.inference_mode(), _spy(linear, "cublaslt_linear_gelu") as gelus:
        got = half(**inputs).last_hidden_state.float()
        with kernels.disabled():
            want = half(**inputs).last_hidden_state.float()
    assert gelus.call_count == model.config.num_hidden_layers
    assert (got - want).abs().max().item() <= 0.1  # bf16 steps (the accuracy against fp32 is checked above)


def test_tanh_gelu_epilogue_is_exact_in_fp32(device):
    if device.type != "cuda":
        pytest.skip("the GEMM epilogue runs on CUDA")
    torch.manual_seed(0)
    model = BERT(BERTConfig.tiny(vocab_size=100, hidden_act="gelu_pytorch_tanh")).to(device).eval()
    ids = torch.randint(0, 100, (3, 16), device=device)
    with torch.inference_mode(), _spy(linear, "cublaslt_linear_gelu") as gelus:
        got = model(ids).last_hidden_state
        with kernels.disabled():
            want = model(ids).last_hidden_state
    assert gelus.call_count == model.config.num_hidden_layers
    assert (got - want).abs().max().item() <= 1e-5


def test_a_trace_sees_every_module_so_the_fused_paths_stand_aside(minilm, device, monkeypatch):
    monkeypatch.setattr(layer_norm, "MIN_FUSED_ELEMENTS", 0)
    _, tokenizer = minilm
    model = BERT.from_pretrained(BERT_Weights.DEFAULT.path, device=device).eval()
    with torch.inference_mode(), _spy(layer_norm, "triton_add_layer_norm") as norms, \
            trace(model, attentions=False, shapes=True) as recorded:
        model(**batch(tokenizer, device))
    assert norms.call_count == 0
    assert any(call.path.endswith("attention.output.LayerNorm") for call in recorded.calls)


def test_corpus_statistics_and_vectors_on_the_device_equal_the_cpu_run(minilm, device, tmp_path):
    pytest.importorskip("duckdb")
    pytest.importorskip("usearch")
    from bertviz_lab.corpus import analyze

    model, tokenizer = minilm
    texts = TEXTS * 3 + ["Short one.", "A longer sentence, with commas; and a question?"]
    on_cpu = analyze(model, tokenizer, texts, tmp_path / "cpu", vectors=["hidden"], layers=[1, 4], progress=False)
    moved = BERT.from_pretrained(BERT_Weights.DEFAULT.path, device=device)
    on_device = analyze(moved, tokenizer, texts, tmp_path / "device", vectors=["hidden"], layers=[1, 4],
                        progress=False)
    want, got = on_cpu.head_stats(), on_device.head_stats()
    assert list(got.columns) == list(want.columns) and len(got) == 2 * 12
    assert (got.drop(columns="queries") - want.drop(columns="queries")).abs().max().max() <= 1e-4
    assert (got["queries"] == want["queries"]).all()
    # the three copies of text 0 hold the same token at position 2: its nearest contexts on either device
    assert sorted(on_device.nearest(0, 2, 4, k=3)["text_id"]) == sorted(on_cpu.nearest(0, 2, 4, k=3)["text_id"])
