"""saliency() bounds: steps between 1 and MAX_STEPS (the panel's, one constant), points per batch sized from a memory
budget estimated from the model's config (internal_batch_size caps it), bad budgets named, and an absurd step count
refused at once in a child under a 2 GB address-space limit."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap

import pytest
import torch
from tiny_models import tiny_config

from bertviz_lab.model import BERT, BERTConfig, BERTForMaskedLM, BERTTokenizerFast
from bertviz_lab.model import footprint as fp
from bertviz_lab.trace import saliency
from bertviz_lab.trace.saliency import DEFAULT_MEMORY_BUDGET, FALLBACK_BATCH, MAX_STEPS, point_bytes
from bertviz_lab.widgets import SaliencyPanel
from bertviz_lab.widgets.panels import saliency as panel_module

CLS, SEP = 1, 2
IDS = dict(special_token_ids=(CLS, SEP), mask_token_id=3)
TOKENS = 12
ADDRESS_SPACE = 2 * 1024**3
MINILM = BERTConfig(vocab_size=30522, hidden_size=384, num_attention_heads=12, num_hidden_layers=6,
                    intermediate_size=1536)  # all-MiniLM-L6-v2's sizes


def inputs(length: int = TOKENS) -> dict[str, torch.Tensor]:
    ids = torch.tensor([[CLS, *range(5, 5 + length - 2), SEP]])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def target(output) -> torch.Tensor:
    return output[0][:, 0, 0]


@pytest.fixture(scope="module")
def model() -> BERT:
    torch.manual_seed(0)
    return BERT(tiny_config(vocab_size=40, max_position_embeddings=TOKENS)).eval()


def batches_seen(model: torch.nn.Module, **kwargs) -> list[int]:
    """The number of points in each forward that saliency() runs."""
    seen: list[int] = []
    handle = model.register_forward_pre_hook(lambda _, args, kw: seen.append(kw["inputs_embeds"].shape[0]),
                                             with_kwargs=True)
    try:
        saliency(model, inputs(), target, **IDS, **kwargs)
    finally:
        handle.remove()
    return seen


@pytest.mark.parametrize(("steps", "kind", "message"), [
    (0, ValueError, "steps must be a positive int (at least 1), got 0."),
    (1025, ValueError, "steps must be at most 1024, got 1025."),
    (10**5, ValueError, "steps must be at most 1024, got 100000."),
    (2.5, TypeError, "steps must be a positive int, got float 2.5."),
    ("64", TypeError, "steps must be a positive int, got str '64'."),
])
def test_steps_are_bounded_with_one_line_naming_the_value(model, steps, kind, message):
    with pytest.raises(kind) as refused:
        saliency(model, inputs(), target, steps=steps)
    assert str(refused.value) == message


def test_a_huge_step_count_is_echoed_clipped(model):
    with pytest.raises(ValueError) as refused:
        saliency(model, inputs(), target, steps=10**5000)
    assert str(refused.value).startswith("steps must be at most 1024, got ") and len(str(refused.value)) < 300


def test_the_panel_and_saliency_share_one_step_limit(model):
    assert panel_module.MAX_STEPS is MAX_STEPS == 1024
    assert batches_seen(model, steps=MAX_STEPS, memory_budget=10**12) == [MAX_STEPS]  # the limit itself runs


@pytest.mark.parametrize(("budget", "kind", "message"), [
    ("lots", ValueError, "memory_budget='lots' is not a size: expected e.g. 64GB, 512MiB or a number of bytes."),
    (0, ValueError, "memory_budget must be a finite number of bytes (at least 1), got 0."),
    (-5, ValueError, "memory_budget must be a finite number of bytes (at least 1), got -5."),
    (float("inf"), ValueError, "memory_budget must be a finite number of bytes (at least 1), got inf."),
    (float("nan"), ValueError, "memory_budget must be a finite number of bytes (at least 1), got nan."),
    (True, TypeError, "memory_budget must be a number of bytes or a size such as '512MB', got bool True."),
    ([1], TypeError, "memory_budget must be a number of bytes or a size such as '512MB', got list [1]."),
])
def test_a_bad_memory_budget_is_named(model, budget, kind, message):
    with pytest.raises(kind) as refused:
        saliency(model, inputs(), target, memory_budget=budget)
    assert str(refused.value) == message


def test_points_per_batch_follow_the_budget_and_the_cap(model):
    per_point = point_bytes(model, model.get_input_embeddings(), TOKENS)
    assert batches_seen(model, steps=8, memory_budget=3 * per_point) == [3, 3, 2]
    assert batches_seen(model, steps=8, memory_budget="1GB") == [8]
    assert batches_seen(model, steps=8, memory_budget=10**9, internal_batch_size=5) == [5, 3]
    assert batches_seen(model, steps=8, memory_budget=1) == [1] * 8  # at least one point at a time
    assert batches_seen(model, method="gradient_x_input", memory_budget=1) == [1]
    batched = saliency(model, inputs(), target, steps=8, memory_budget=3 * per_point, **IDS)
    assert torch.allclose(batched, saliency(model, inputs(), target, steps=8, **IDS), atol=1e-6)


def test_the_default_budget_gives_about_ten_points_at_512_tokens():
    """The measured 96 MB per point (all-MiniLM-L6-v2, 512 tokens) is what the estimate says, within 10%: 1 GB holds
    10 points, and the whole process peaks near 1.4 GB (benchmarks/saliency_memory.py)."""
    per_point = fp.activation_elements(fp.Sizes.of(MINILM), 1, 512, "gradients") * 4
    assert 0.9 * 96e6 < per_point < 1.1 * 96e6
    assert DEFAULT_MEMORY_BUDGET // per_point == 10


def test_an_mlm_head_counts_its_logits_per_point():
    torch.manual_seed(0)
    config = tiny_config(vocab_size=5000, max_position_embeddings=TOKENS)
    backbone, mlm = BERT(config), BERTForMaskedLM(config)
    extra = point_bytes(mlm, mlm.get_input_embeddings(), TOKENS) - \
        point_bytes(backbone, backbone.get_input_embeddings(), TOKENS)
    assert extra == 2 * (5000 + 3 * config.hidden_size) * TOKENS * 4  # the logits and their gradient, float32


class Wrapped(torch.nn.Module):
    """A model with no config to size points from."""

    def __init__(self, inner: BERT) -> None:
        super().__init__()
        self.inner = inner

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()

    def forward(self, inputs_embeds=None, **kwargs):
        return self.inner(inputs_embeds=inputs_embeds, **kwargs)


def test_a_model_without_sizes_goes_in_fixed_batches(model):
    assert batches_seen(Wrapped(model), steps=20) == [FALLBACK_BATCH, FALLBACK_BATCH, 4]


@pytest.fixture
def word_tokenizer(tmp_path) -> BERTTokenizerFast:
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "."]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    return BERTTokenizerFast(vocab_file=tmp_path / "vocab.txt")


def test_the_panel_refuses_steps_over_the_limit_and_sizes_batches_by_the_budget(word_tokenizer, monkeypatch):
    torch.manual_seed(0)
    model = BERT(tiny_config(vocab_size=11)).eval()
    calls: list[dict] = []

    def recorded(*args, **kwargs):
        calls.append(kwargs)
        return saliency(*args, **kwargs)

    monkeypatch.setattr(panel_module, "saliency", recorded)
    with pytest.raises(ValueError, match=r"^steps must be at most 1024, got 1025\.$"):
        SaliencyPanel(model, word_tokenizer, "the cat sat", steps=1025)
    panel = SaliencyPanel(model, word_tokenizer, "the cat sat on the mat .", steps=4)
    try:
        assert panel.steps.max == MAX_STEPS and calls
        # the default memory budget sizes the batches; the panel only caps them so a long run reports progress
        assert all("memory_budget" not in call for call in calls)
        assert all(call["internal_batch_size"] >= -(-call["steps"] // panel_module.PROGRESS_UPDATES) for call in calls)
    finally:
        panel.close()


# in a child under RLIMIT_AS ----------------------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import json, time, torch
    from bertviz_lab.model import BERT, BERTConfig
    from bertviz_lab.trace import saliency
    model = BERT(BERTConfig.tiny(vocab_size=50)).eval()
    ids = torch.tensor([[1, 5, 6, 7, 2]])
    started = time.perf_counter()
    try:
        saliency(model, {"input_ids": ids}, lambda out: out[0][:, 0, 0], steps=10**5)
        outcome = ["finished", ""]
    except BaseException as error:
        outcome = [type(error).__name__, str(error)]
    print(json.dumps([*outcome, time.perf_counter() - started]))
""")


def test_an_absurd_step_count_ends_at_once_under_a_memory_limit():
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=limit)
    assert done.returncode == 0, done.stderr[-3000:]
    kind, message, seconds = json.loads(done.stdout.strip().splitlines()[-1])
    assert (kind, message) == ("ValueError", "steps must be at most 1024, got 100000.")
    assert seconds < 20
