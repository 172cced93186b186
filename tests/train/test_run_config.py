"""The YAML run configuration: defaults, the seed's key names and aliases, and errors that name the key."""

from __future__ import annotations

import pytest

from bertviz_lab.train.run_config import SCHEMA, ConfigError, load_config, parse_override, validate_config


def test_defaults_fill_every_section():
    config = validate_config({})
    assert set(config) == {"data", "model", "training", "logging"}
    assert config["data"]["corpus"] == "builtin" and config["training"]["precision"] == "auto"
    assert all(key.alias_of is None or key.alias_of.split(".")[1] in config[section]
               for section, keys in SCHEMA.items() for key in keys.values())


def test_the_seeds_keys_and_the_hugging_face_names_both_work():
    seed_style = validate_config({"data": {"sequence_length": 32, "random_seed": 1},
                                  "model": {"dim_model": 64, "num_heads": 4, "dim_ff": 128, "num_layers": 2},
                                  "training": {"epochs": 3, "mlm_loss_weight": 0.5, "nsp_loss_weight": 2}})
    hf_style = validate_config({"data": {"max_seq_length": 32, "random_seed": 1},
                                "model": {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128,
                                          "num_hidden_layers": 2},
                                "training": {"epochs": 3, "mlm_loss_weight": 0.5, "nsp_loss_weight": 2}})
    assert seed_style == hf_style
    assert seed_style["model"]["dim_model"] == 64 and seed_style["training"]["nsp_loss_weight"] == 2.0


def test_yaml_exponent_without_a_dot_is_read_as_a_number(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("training:\n  learning_rate: 1e-3\n")  # YAML 1.1 reads this as the string "1e-3"
    assert load_config(file)["training"]["learning_rate"] == pytest.approx(1e-3)


@pytest.mark.parametrize("raw, message", [
    ({"training": {"learnig_rate": 0.1}}, r"unknown key 'training.learnig_rate'.*Did you mean 'learning_rate'"),
    ({"trainig": {}}, r"unknown key 'trainig'.*Did you mean 'training'"),
    ({"data": {"batch_size": "big"}}, r"data.batch_size must be an integer, got 'big' \(str\)"),
    ({"data": {"batch_size": 2.5}}, r"data.batch_size must be an integer"),
    ({"data": {"batch_size": True}}, r"data.batch_size must be an integer"),
    ({"training": {"compile": "yes"}}, r"training.compile must be true or false"),
    ({"training": {"precision": "fp8"}}, r"training.precision must be one of auto, fp32, bf16, fp16"),
    ({"data": {"mask_probability": 1.5}}, r"data.mask_probability must be <"),
    ({"training": {"learning_rate": -1}}, r"training.learning_rate must be >="),
    ({"training": {"learning_rate": None}}, r"training.learning_rate must be a number, got null"),
    ({"model": {"dim_model": 64, "hidden_size": 64}}, r"model.hidden_size and model.dim_model set the same thing"),
    ({"training": {"steps": 5, "epochs": 1}}, r"training.steps and training.epochs are both set"),
    ({"data": [1, 2]}, r"section 'data' must be a mapping"),
    ([1, 2], r"must be a mapping of sections"),
])
def test_bad_values_name_the_key(raw, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(raw)


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("training: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(broken)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must hold a mapping of sections"):
        load_config(listed)


def test_overrides_are_yaml_values_and_checked(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("training:\n  steps: 10\n")
    config = load_config(file, ["training.steps=3", "training.compile=true", "data.tokenizer_dir=null"])
    assert config["training"]["steps"] == 3 and config["training"]["compile"] is True
    assert load_config(None, {"logging.progress": False})["logging"]["progress"] is False
    assert parse_override("data.corpus=some/folder") == ("data", "corpus", "some/folder")
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_override("steps=3")
    with pytest.raises(ConfigError, match="unknown key 'training.stepz'"):
        load_config(file, ["training.stepz=3"])
