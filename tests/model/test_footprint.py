"""Absurd model sizes are refused before anything is allocated: the estimate (exact parameter counts), the memory
limit and its override, and every way a model is built (constructor, factory, from_pretrained, load) ending in one
clear ValueError under a 2 GB address-space limit, fast."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import textwrap

import pytest
import torch

from bertviz_lab.model import (
    BERT,
    BERTConfig,
    BERTForCausalLM,
    BERTForMaskedLM,
    BERTForNextSentencePrediction,
    BERTForPreTraining,
    BERTForQuestionAnswering,
    BERTForSequenceClassification,
    BERTForTokenClassification,
)
from bertviz_lab.model import footprint as fp

ENCODERS = (BERT, BERTForPreTraining, BERTForMaskedLM, BERTForNextSentencePrediction, BERTForSequenceClassification,
            BERTForTokenClassification, BERTForQuestionAnswering)
ADDRESS_SPACE = 2 * 1024**3  # the children's RLIMIT_AS: an allocation of the absurd sizes would fail at once
MESSAGE = (r"^BERTConfig\.{field}={value} needs about [\d.]+ [KMGTPE]?B of parameters \(float32\); this machine has "
           r"[\d.]+ [KMGT]?B available; set BERTVIZ_LAB_MEMORY_LIMIT to override \(a size such as 64GB, or off\)\.$")


@pytest.fixture(autouse=True)
def no_override(monkeypatch):
    """The machine's own memory decides unless a test sets the override."""
    monkeypatch.delenv(fp.MEMORY_LIMIT_VARIABLE, raising=False)


def estimated_parameters(model_class: type, config: BERTConfig) -> int:
    return fp.estimate(config, heads=fp.heads_of(model_class),
                       pooler=getattr(model_class, "add_pooling_layer", None)).parameters


@pytest.mark.parametrize("overrides", [
    {}, dict(tie_word_embedding=False, num_labels=5), dict(position_embedding_type="sinusoidal", type_vocab_size=3),
])
@pytest.mark.parametrize("model_class", ENCODERS)
def test_the_parameter_count_is_exact_for_every_model(model_class, overrides, tiny_config):
    config = tiny_config(**overrides)
    assert estimated_parameters(model_class, config) == model_class(config).num_parameters()


def test_the_parameter_count_is_exact_for_a_decoder_with_cross_attention(tiny_config):
    config = tiny_config(is_decoder=True, add_cross_attention=True)
    for model_class in (BERT, BERTForCausalLM):
        assert estimated_parameters(model_class, config) == model_class(config).num_parameters()


def test_real_sizes_are_the_published_ones_and_fit():
    """bert-base-uncased's BertModel has 109,482,240 parameters; BERT-large's about 335M, 1.3 GB in float32."""
    assert fp.estimate(BERTConfig.base()).parameters == 109_482_240
    large = fp.estimate(BERTConfig.large(), heads=("mlm", "nsp"))
    assert 335e6 < large.parameters < 340e6 and 1.3e9 < large.parameter_bytes < 1.4e9
    for config in (BERTConfig.base(), BERTConfig.large(), BERTConfig.tiny()):
        fp.check_model(config, BERTForPreTraining, torch.float32)  # does not raise on this machine


def test_activations_grow_with_batch_and_tokens_and_training_keeps_the_most():
    config = BERTConfig.base()
    inference = fp.estimate(config, batch=8, sequence_length=128)
    training = fp.estimate(config, batch=8, sequence_length=128, mode="training", heads=("mlm", "nsp"))
    assert 0 < inference.activation_bytes < training.activation_bytes
    assert fp.estimate(config, batch=16, sequence_length=128).activation_bytes == 2 * inference.activation_bytes
    assert training.total_bytes == 4 * training.parameter_bytes + training.activation_bytes
    assert inference.total_bytes == inference.parameter_bytes + inference.activation_bytes
    with pytest.raises(ValueError, match="mode must be one of"):
        fp.estimate(config, batch=1, sequence_length=8, mode="backward")


def test_the_override_sets_the_limit_and_names_itself(monkeypatch, tiny_config):
    monkeypatch.setenv(fp.MEMORY_LIMIT_VARIABLE, "100kB")
    with pytest.raises(ValueError) as refused:
        BERTForMaskedLM(tiny_config())
    message = str(refused.value)
    assert "\n" not in message and "BERTVIZ_LAB_MEMORY_LIMIT=100kB allows 100 KB" in message
    assert message.startswith("BERTConfig.") and "of parameters (float32)" in message
    monkeypatch.setenv(fp.MEMORY_LIMIT_VARIABLE, "64GB")
    assert fp.memory_limit().bytes == 64 * 10**9
    monkeypatch.setenv(fp.MEMORY_LIMIT_VARIABLE, "off")
    assert fp.memory_limit().bytes is None
    fp.check_model(BERTConfig(num_hidden_layers=10**6), BERT, torch.float32)  # "off": nothing is checked


@pytest.mark.parametrize("value", ["lots", "-5GB", "12 parsecs", "x" * 5000])
def test_a_bad_override_is_a_one_line_error_naming_the_variable(value, monkeypatch, tiny_config):
    monkeypatch.setenv(fp.MEMORY_LIMIT_VARIABLE, value)
    with pytest.raises(ValueError, match=r"^BERTVIZ_LAB_MEMORY_LIMIT=.* is not a size: expected e\.g\. 64GB") as bad:
        BERT(tiny_config())
    assert len(str(bad.value)) < 320 and "\n" not in str(bad.value)


@pytest.mark.parametrize(("text", "size"), [
    ("64GB", 64 * 10**9), ("64 gb", 64 * 10**9), ("1.5TB", 15 * 10**11), ("512MiB", 512 * 2**20), ("4g", 4 * 10**9),
    ("1000000", 10**6), ("2KiB", 2048), ("1e9", 10**9),
])
def test_sizes_read_in_decimal_and_binary_units(text, size):
    assert fp.parse_size(text, "limit") == size


@pytest.mark.parametrize(("count", "text"), [(28e12, "28 TB"), (1.34e9, "1.3 GB"), (512e6, "512 MB"), (999, "999 B"),
                                              (1e30, "1.0e+12 EB")])
def test_byte_counts_read_as_people_write_them(count, text):
    assert fp.format_bytes(count) == text


def test_the_field_named_is_the_one_the_size_rests_on():
    def weights(values):
        return fp.estimate(fp.Sizes(**values)).parameter_bytes

    base = fp.Sizes.of(BERTConfig.base()).values()
    for field, value in (("num_hidden_layers", 10**6), ("vocab_size", 10**10), ("intermediate_size", 10**9),
                         ("max_position_embeddings", 10**9), ("hidden_size", 12 * 10**5)):
        assert fp.dominant(weights, {**base, field: value}, fp.BERT_BASE) == field
    both = {**base, "num_hidden_layers": 10**4, "vocab_size": 10**11}  # 7e10 vs 7.7e13 parameters
    assert fp.dominant(weights, both, fp.BERT_BASE) == "vocab_size"


# every way a model is built, in a child under RLIMIT_AS --------------------------------------------------------
CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from pathlib import Path
    import bertviz_lab
    from bertviz_lab.model import (BERT, BERTConfig, BERTForPreTraining, BERTForSequenceClassification,
                                   bert_for_pre_training_base, create_bert_model)
    folder = Path(sys.argv[1])
    BERTForPreTraining(BERTConfig.tiny()).save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1000000}))
    cases = {
        "num_hidden_layers": lambda: BERT(BERTConfig(num_hidden_layers=10**6)),
        "vocab_size": lambda: BERTForPreTraining(BERTConfig(vocab_size=10**10)),
        "hidden_size": lambda: BERT(BERTConfig(hidden_size=12 * 10**5)),
        "intermediate_size": lambda: BERT(BERTConfig(intermediate_size=10**10)),
        "max_position_embeddings": lambda: BERT(BERTConfig(max_position_embeddings=10**10)),
        "num_labels": lambda: BERTForSequenceClassification(BERTConfig(num_labels=10**9)),
        "factory": lambda: bert_for_pre_training_base(num_hidden_layers=10**6),
        "create_bert_model": lambda: create_bert_model(num_layers=10**6),
        "from_pretrained": lambda: BERTForPreTraining.from_pretrained(folder),
        "load": lambda: bertviz_lab.load(folder),
    }
    results = {}
    for name, build in cases.items():
        started = time.perf_counter()
        try:
            build()
            results[name] = ["built", "", 0.0]
        except BaseException as error:
            results[name] = [type(error).__name__, str(error), time.perf_counter() - started]
    started = time.perf_counter()
    BERTForPreTraining(BERTConfig.base())  # a real size still builds under the same limit
    results["bert-base"] = ["built", "", time.perf_counter() - started]
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
    print(json.dumps({"results": results, "peak_kb": peak}))
""")


def limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@pytest.fixture(scope="module")
def built_in_a_child(tmp_path_factory) -> dict:
    env = {key: value for key, value in os.environ.items() if key != fp.MEMORY_LIMIT_VARIABLE}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path_factory.mktemp("absurd"))], env=env,
                          capture_output=True, text=True, timeout=180, preexec_fn=limit_address_space)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # the child builds every absurd size and bert-base under an address-space limit
@pytest.mark.parametrize(("case", "field", "value"), [
    ("num_hidden_layers", "num_hidden_layers", 1000000), ("vocab_size", "vocab_size", 10**10),
    ("hidden_size", "hidden_size", 1200000), ("intermediate_size", "intermediate_size", 10**10),
    ("max_position_embeddings", "max_position_embeddings", 10**10), ("num_labels", "num_labels", 10**9),
    ("factory", "num_hidden_layers", 1000000), ("create_bert_model", "num_hidden_layers", 1000000),
    ("from_pretrained", "num_hidden_layers", 1000000), ("load", "num_hidden_layers", 1000000),
])
def test_an_absurd_size_is_one_value_error_before_anything_is_allocated(built_in_a_child, case, field, value):
    kind, message, seconds = built_in_a_child["results"][case]
    assert kind == "ValueError", message
    assert re.match(MESSAGE.format(field=field, value=value), message), message
    assert seconds < 20


@pytest.mark.slow
def test_real_sizes_build_under_the_same_limit_and_nothing_big_was_allocated(built_in_a_child):
    assert built_in_a_child["results"]["bert-base"][0] == "built"
    assert built_in_a_child["peak_kb"] * 1024 < ADDRESS_SPACE
    message = built_in_a_child["results"]["num_hidden_layers"][1]
    available = message.split("this machine has ")[1].split(" available")[0]
    assert available.endswith(("MB", "GB")) and float(available.split()[0]) <= (2.2 if "GB" in available else 2200)
