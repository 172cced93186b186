"""The YAML run configuration: defaults, the seed's key names and aliases, and errors that name the key."""

from __future__ import annotations

import time

import pytest

from bertviz_lab.train.run_config import (
    ECHO_LIMIT,
    SCHEMA,
    ConfigError,
    load_config,
    parse_override,
    validate_config,
)


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


def _one_short_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and len(message) < 2 * ECHO_LIMIT + 200, message[:1000]
    return message


@pytest.mark.parametrize("levels", [2, 6, 9])
def test_aliases_of_lists_are_refused_at_once(tmp_path, billion_laughs, levels):
    file = tmp_path / "laughs.yaml"
    file.write_text(billion_laughs(levels))
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=r"laughs.yaml, line 4: the alias \*a repeats a list or mapping") as error:
        load_config(file)
    assert time.perf_counter() - started < 2
    assert "single value" in _one_short_line(error)


def test_an_override_may_not_alias_a_list_either(billion_laughs):
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=r"override data.corpus, line 1: the alias \*a repeats") as error:
        load_config(None, [f"data.corpus={billion_laughs(6, flow=True)}"])
    assert time.perf_counter() - started < 2
    _one_short_line(error)
    with pytest.raises(ConfigError, match=r"repeats a list or mapping"):
        load_config(None, ["data.corpus={defaults: &d {x: 1}, again: *d}"])


def test_aliases_of_single_values_work(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("training:\n  checkpoint_dir: &runs runs/a\n  resume_from: *runs\n  steps: &n 5\n"
                    "  warmup_steps: *n\n")
    training = load_config(file)["training"]
    assert training["checkpoint_dir"] == training["resume_from"] == "runs/a"
    assert training["steps"] == training["warmup_steps"] == 5


@pytest.mark.parametrize("text, line, key, first", [
    ("training:\n  steps: 5\n  warmup_steps: 1\n  steps: 7\n", 4, "steps", 2),
    ("training:\n  steps: 5\ndata:\n  batch_size: 8\ntraining:\n  warmup_steps: 1\n", 5, "training", 1),
    ("training: {steps: 5, steps: 6}\n", 1, "steps", 1),
])
def test_a_key_written_twice_is_one_line_naming_both(tmp_path, text, line, key, first):
    file = tmp_path / "twice.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_config(file)
    assert str(raised.value) == (f"{file}, line {line}: the key {key!r} is written twice (first on line {first}); "
                                 "keep one.")


@pytest.mark.parametrize("text, named", [
    ("data:\n  batch_size: " + "x" * 100_000 + "\n", "data.batch_size must be an integer"),
    ("data:\n  corpus: [" + ", ".join(["lol"] * 100_000) + "]\n", "data.corpus must be a string"),
    ("data:\n  corpus: " + "[" * 20 + "]" * 20 + "\n", "data.corpus must be a string"),
    ("data:\n  " + "k" * 1000 + ": 1\n", "unknown key 'data.kkk"),
    ("data:\n  corpus: [unclosed " + "x" * 100_000 + "\n", "not valid YAML"),
    ("data:\n  batch_size: " + "9" * 5000 + "\n", "cannot be read"),
    ("data:\n  corpus: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("data:\n  corpus: *" + "n" * 100_000 + "\n", "not valid YAML: found undefined alias"),
], ids=["long-string", "long-list", "nested-list", "long-key", "long-bad-yaml", "long-int", "deep", "long-alias"])
def test_errors_echo_at_most_a_short_value(tmp_path, text, named):
    file = tmp_path / "big.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config(file)
    assert named in _one_short_line(error)


def test_override_errors_echo_at_most_a_short_value():
    with pytest.raises(ConfigError, match="data.batch_size must be an integer") as error:
        load_config(None, ["data.batch_size=" + "x" * 100_000])
    _one_short_line(error)
    with pytest.raises(ConfigError, match="must look like section.key=value") as error:
        parse_override("x" * 100_000)
    _one_short_line(error)
    with pytest.raises(ConfigError, match="must be a string") as error:
        validate_config({"data": {"corpus": [[list(range(1000))] * 1000] * 1000}})  # shown without walking it all
    _one_short_line(error)
