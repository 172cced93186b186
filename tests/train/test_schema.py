"""One schema: the CLI, the Trainer and the YAML loader see one default per setting and apply one check per field;
the documentation's table of the YAML keys is the one the schema generates, never a copy kept by hand."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from bertviz_lab import cli
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.train import runner
from bertviz_lab.train.data import MaskingCollator, PairBatches, SentencePairDataset, evaluation_batches
from bertviz_lab.train.run_config import ConfigError, load_config, validate_config
from bertviz_lab.train.schema import MODEL_FIELDS, SCHEMA, key
from bertviz_lab.train.schema_table import main, markdown
from bertviz_lab.train.trainer import TrainConfig, run_config_keys
from bertviz_lab.util.fields import fields_of

ROOT = Path(__file__).resolve().parents[2]
CLI_PAGE = ROOT / "docs" / "guides" / "cli.md"
YAML_KEYS = "<!-- yaml-keys -->"  # docs/hooks.py puts markdown() here when the site is built


def settings_seen_by_the_cli(tmp_path, monkeypatch) -> TrainConfig:
    """The TrainConfig `bertviz-lab train --config <empty file>` would train with."""
    seen = []

    def run(self):
        seen.append(self.train_config(TrainConfig().max_steps))
        return {}

    monkeypatch.setattr(runner.BertRunner, "run", run)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert cli.main(["train", "--config", str(empty)]) == 0
    return seen[0]


def test_the_cli_the_trainer_and_the_yaml_loader_see_one_default_per_setting(tmp_path, monkeypatch):
    from_cli = dataclasses.asdict(settings_seen_by_the_cli(tmp_path, monkeypatch))
    from_trainer = dataclasses.asdict(TrainConfig())
    assert from_cli == from_trainer
    loaded = validate_config({})
    for name, full in run_config_keys().items():
        section, _, field = full.partition(".")
        expected = loaded[section][field] if name != "seed" else loaded["data"]["random_seed"]  # null: random_seed
        assert from_trainer[name] == expected, name
    assert from_trainer["learning_rate"] == SCHEMA["training"]["learning_rate"].default == 1e-3
    for function, parameter, full in ((SentencePairDataset, "short_seq_prob", "data.short_seq_prob"),
                                      (PairBatches, "mlm_probability", "data.mask_probability"),
                                      (MaskingCollator, "mlm_probability", "data.mask_probability"),
                                      (evaluation_batches, "mlm_probability", "data.mask_probability")):
        assert inspect.signature(function).parameters[parameter].default == key(full).default, function


def test_the_model_keys_default_to_bert_configs_values():
    loaded = validate_config({"model": {"preset": "base"}})
    built = runner.BertRunner({"model": {"preset": "base"}}).model_config(vocab_size=100)
    for ours, theirs in MODEL_FIELDS.items():
        assert loaded["model"][ours] is None  # null: the preset's
        if theirs != "max_position_embeddings":  # that one is at least data.sequence_length
            assert getattr(built, theirs) == getattr(BERTConfig.base(), theirs), theirs
    assert "(default 0.1)" in SCHEMA["model"]["hidden_dropout_prob"].help
    assert BERTConfig().hidden_dropout_prob == 0.1


@pytest.mark.parametrize("ours, value", [("dim_model", 0), ("num_heads", -1), ("hidden_dropout_prob", 1.0),
                                         ("attention_probs_dropout_prob", -0.5), ("max_position_embeddings", 0)])
def test_a_model_key_and_its_bert_config_field_refuse_the_same_value(ours, value):
    with pytest.raises(ValueError, match=rf"^BERTConfig\.{MODEL_FIELDS[ours]} must be "):
        BERTConfig(**{MODEL_FIELDS[ours]: value})
    with pytest.raises(ConfigError, match=rf"^model\.{ours} must be "):
        validate_config({"model": {ours: value}})


def out_of_bounds(field) -> object:
    """A value just outside the field's lowest bound."""
    if field.ge is not None:
        return field.ge - (1 if field.kind is int else max(abs(field.ge), 1e-3))
    return field.gt


@pytest.mark.parametrize("name", [name for name, field in fields_of(TrainConfig).items()
                                  if field.ge is not None or field.gt is not None])
def test_a_trainer_setting_and_its_yaml_key_refuse_the_same_value(name):
    field = fields_of(TrainConfig)[name]
    bad = out_of_bounds(field)
    with pytest.raises(ValueError, match=rf"^TrainConfig\.{name} must be "):
        TrainConfig(**{name: bad})
    full = run_config_keys().get(name)
    if full is not None:
        assert field.ge == key(full).ge and field.gt == key(full).gt
        section, _, yaml_key = full.partition(".")
        with pytest.raises(ConfigError, match=rf"^{re.escape(full)} must be "):
            validate_config({section: {yaml_key: bad}})


def test_a_trainer_check_across_keys_names_the_run_config_key_before_any_work():
    overrides = ["data.batch_size=10", "training.gradient_accumulation_steps=4"]
    assert load_config(None, overrides)["data"]["batch_size"] == 10  # each key on its own is fine
    with pytest.raises(ConfigError, match=r"^data\.batch_size \(10\) must be divisible by gradient_accumulation"):
        runner.BertRunner(None, overrides).build_trainer()


def test_the_schema_prints_the_markdown_table(capsys):
    assert main([]) == 0
    printed = capsys.readouterr().out
    assert printed == markdown()
    rows = [line for line in printed.splitlines() if line.startswith("| `")]
    keys = [name for section, keys in SCHEMA.items() for name, k in keys.items() if k.alias_of is None]
    assert len(rows) == len(keys)
    assert "| `training.learning_rate` | float | `0.001` | peak AdamW learning rate |" in rows
    assert "| `data.sequence_length` | int | `128` | tokens per pair, [CLS]/[SEP] included (alias: " \
           "`data.max_seq_length`) |" in rows
    assert "| `model.dim_model` | int or null | `null` |" in printed and "`logging.progress` | bool | `true`" in printed


def test_the_docs_generate_the_table_of_the_yaml_keys_and_nothing_restates_it():
    assert YAML_KEYS in CLI_PAGE.read_text(encoding="utf-8"), f"{CLI_PAGE} should ask for the generated table"
    row = "| `training.learning_rate` |"
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        assert row not in page.read_text(encoding="utf-8"), f"{page} restates the YAML keys' table by hand"
