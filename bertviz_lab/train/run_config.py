"""The YAML run configuration: read safely, checked against the schema (train/schema.py), errors naming the key.

YAML anchors and aliases (`&name`, `*name`) may repeat a single value (a string, number, true/false or null), never a
list or mapping: that is how a few lines expand to billions of items ("billion laughs"), and no key takes a list or
mapping. A key written twice in one mapping is an error naming both lines (YAML would keep the last one silently).
Errors echo a value in at most ECHO_LIMIT characters.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from bertviz_lab.device import select_device
from bertviz_lab.model import footprint
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.train.presets import config_path, preset_names
from bertviz_lab.train.schema import MODEL_FIELDS, SCHEMA, Key
from bertviz_lab.util.fields import check
from bertviz_lab.util.files import ECHO_LIMIT, clip, shown

__all__ = ["ECHO_LIMIT", "SCHEMA", "ConfigError", "Key", "RunConfig", "clip", "load_config", "parse_override",
           "parse_yaml", "shown", "validate_config"]  # clip and shown (util.files) are used from here too


class ConfigError(ValueError):
    """A run configuration that cannot work; the message names the key (`section.key`) and what was expected."""


class _ConfigLoader(yaml.SafeLoader):
    """yaml.SafeLoader whose aliases may only repeat single values (see the module docstring)."""

    source = "the configuration"

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None and not isinstance(node, yaml.ScalarNode):
                raise ConfigError(f"{self.source}, line {event.start_mark.line + 1}: the alias *{clip(event.anchor)} "
                                  f"repeats a list or mapping; in a run config an alias may only repeat a single "
                                  f"value (a string, number, true/false or null).")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        """A mapping whose keys are each written once: YAML would keep the last of two `steps:` silently."""
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise ConfigError(f"{self.source}, line {key_node.start_mark.line + 1}: the key {clip(str(key))!r} "
                                      f"is written twice (first on line {seen[key].start_mark.line + 1}); keep one.")
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's (multi-line) error as one short line: what went wrong and where."""
    if not isinstance(error, yaml.MarkedYAMLError):
        return clip(" ".join(str(error).split()))
    what = "; ".join(part for part in (error.context, error.problem) if part)
    mark = error.problem_mark or error.context_mark
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return clip(" ".join(what.split())) + where


def parse_yaml(text: str, source: str) -> Any:
    """YAML read safely (aliases only of single values); any failure is a one-line ConfigError naming `source`."""
    loader = _ConfigLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    except yaml.YAMLError as error:
        raise ConfigError(f"{source} is not valid YAML: {_yaml_problem(error)}") from None
    except RecursionError:
        raise ConfigError(f"{source} is nested too deeply; a run config is sections of single values.") from None
    except ConfigError:
        raise
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise ConfigError(f"{source} holds a value that cannot be read: {clip(str(error))}") from None
    finally:
        loader.dispose()


RunConfig = dict[str, dict[str, Any]]


def _check_value(name: str, key: Key, value: Any) -> Any:
    """The value converted to the key's type, or a ConfigError naming the key."""
    if key.kind is float and isinstance(value, str):
        try:  # YAML 1.1 reads 1e-3 (no dot) as a string
            value = float(value)
        except ValueError:
            pass
    return check(name, key, value, "yaml", type_error=ConfigError, value_error=ConfigError)


def _unknown(name: str, known: Iterable[str], where: str) -> ConfigError:
    known = sorted(known)
    close = difflib.get_close_matches(name.rsplit(".", 1)[-1], known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown key {shown(name)}{where}.{hint} Known keys: {', '.join(known)}.")


def validate_config(raw: Any, source: str = "the configuration") -> RunConfig:
    """Check a parsed YAML mapping against SCHEMA; return every section with defaults filled and aliases resolved."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source} must be a mapping of sections ({', '.join(SCHEMA)}), got {type(raw).__name__}.")
    config: RunConfig = {section: {k: key.default for k, key in keys.items() if key.alias_of is None}
                         for section, keys in SCHEMA.items()}
    spelled: dict[str, str] = {}  # each key set, as the configuration spells it (an alias or its own name)
    for section, values in raw.items():
        if section not in SCHEMA:
            raise _unknown(str(section), SCHEMA, f" in {source} (sections)")
        if values is None:
            continue
        if not isinstance(values, Mapping):
            raise ConfigError(f"section {shown(section)} must be a mapping of keys, got {type(values).__name__}.")
        given: dict[str, str] = {}
        for name, value in values.items():
            keys = SCHEMA[section]
            if name not in keys:
                raise _unknown(f"{section}.{name}", keys, f" in {source}")
            canonical = keys[name].alias_of or f"{section}.{name}"
            if canonical in given:
                raise ConfigError(f"{clip(f'{section}.{name}')} and {given[canonical]} set the same thing; give "
                                  f"only one.")
            given[canonical] = spelled[canonical] = clip(f"{section}.{name}")
            target = canonical.split(".", 1)[1]
            config[section][target] = _check_value(clip(f"{section}.{name}"), keys[target], value)
    if config["training"]["steps"] is not None and config["training"]["epochs"] is not None:
        raise ConfigError("training.steps and training.epochs are both set; give only one.")
    check_run_size(config, spelled)
    return config


def parse_override(text: str) -> tuple[str, str, Any]:
    """`section.key=value` (value read as YAML, aliases as in a config file) -> (section, key, value)."""
    name, sep, value = text.partition("=")
    section, dot, key = name.strip().partition(".")
    if not sep or not dot or not key:
        raise ConfigError(f"override {shown(text)} must look like section.key=value, e.g. training.steps=100.")
    return section, key, parse_yaml(value, f"override {clip(name.strip())}")


def _read_config_text(path: Path) -> str:
    """The config file's text, or a ConfigError saying why it cannot be read."""
    if not path.is_file():
        raise ConfigError(f"config file {shown(str(path))} does not exist (or name a shipped preset: "
                          f"{', '.join(preset_names())}).")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"config file {shown(str(path))} is not UTF-8 text (byte {error.start}).") from None
    except OSError as error:
        raise ConfigError(f"config file {shown(str(path))} cannot be read: {error.strerror}.") from None


def load_config(source: str | os.PathLike | Mapping[str, Any] | None,
                overrides: Iterable[str] | Mapping[str, Any] = ()) -> RunConfig:
    """Read a YAML file or a shipped preset by name (or take a mapping), apply `section.key` overrides, validate."""
    if source is None:
        raw: dict[str, Any] = {}
        name = "the defaults"
    elif isinstance(source, Mapping):
        raw, name = {k: dict(v) if isinstance(v, Mapping) else v for k, v in source.items()}, "the configuration"
    else:
        path = config_path(source)
        name = clip(str(source))
        raw = parse_yaml(_read_config_text(path), name) or {}
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{path} must hold a mapping of sections ({', '.join(SCHEMA)}), "
                              f"got {type(raw).__name__}.")
        raw = {k: dict(v) if isinstance(v, Mapping) else v for k, v in raw.items()}
    items = overrides.items() if isinstance(overrides, Mapping) else (
        ((f"{s}.{k}", v) for s, k, v in map(parse_override, overrides)))
    for dotted, value in items:
        section, _, key = str(dotted).partition(".")
        if not key:
            raise ConfigError(f"override {shown(dotted)} must name section.key.")
        current = raw.setdefault(section, {})
        if not isinstance(current, dict):
            raise ConfigError(f"section {shown(section)} must be a mapping of keys, got {type(current).__name__}.")
        current[key] = value
    return validate_config(raw, name)


# bounds that need several keys, or this machine ----------------------------------------------------------------
PRESETS = {"tiny": BERTConfig.tiny, "base": BERTConfig.base, "large": BERTConfig.large}
MAX_THREADS = 4 * (os.cpu_count() or 1)  # more only slows torch down; 100000 aborts it
PRETRAINED_VOCAB_SIZE = 30522  # minilm's (bert-base-uncased's) vocabulary: the estimate for other tokenizers
SYNTHETIC_BYTES_PER_TOKEN = 40  # a synthetic batch keeps five int64 tensors per token, all made before training
# the model keys that size a run (model.dim_model -> hidden_size, ...): those with a Hugging Face alias
BERT_FIELDS = {f"model.{ours}": theirs for ours, theirs in MODEL_FIELDS.items() if ours != theirs}


def run_sizes(config: RunConfig) -> dict[str, int]:
    """The keys that size a run, by full name (the preset's value where a model key is null)."""
    data, model = config["data"], config["model"]
    preset = PRESETS[model["preset"]]()
    sizes = {key: model[key.split(".")[1]] or getattr(preset, name) for key, name in BERT_FIELDS.items()}
    sizes["model.max_position_embeddings"] = model["max_position_embeddings"] or preset.max_position_embeddings
    keys = ("vocab_size", "sequence_length", "batch_size") + (("num_train_batches", "num_test_batches")
                                                              if data["corpus"] == "synthetic" else ())
    sizes.update({f"data.{key}": data[key] for key in keys})
    return sizes


def _vocab_from_config(data: Mapping[str, Any]) -> bool:
    """data.vocab_size sizes the model: a synthetic corpus' ids or a tokenizer trained here (at most that many)."""
    return data["corpus"] == "synthetic" or data["tokenizer"] == "train"


def run_bytes(config: RunConfig, sizes: Mapping[str, int], on_cpu: bool) -> int:
    """Memory the run needs where the model is built: everything on the CPU (weights x4 with AdamW, activations of
    one micro-batch, synthetic data); on an accelerator only what the host holds (the weights as built, the data)."""
    data = config["data"]
    sequence = sizes["data.sequence_length"]
    shape: dict[str, Any] = {name: sizes[key] for key, name in BERT_FIELDS.items()}  # the int fields, by name
    bert = footprint.Sizes(
        vocab_size=sizes["data.vocab_size"] if _vocab_from_config(data) else PRETRAINED_VOCAB_SIZE, **shape,
        max_position_embeddings=max(sizes["model.max_position_embeddings"], sequence), heads=("mlm", "nsp"))
    micro = -(-sizes["data.batch_size"] // config["training"]["gradient_accumulation_steps"])
    batches = sizes.get("data.num_train_batches", 0) + sizes.get("data.num_test_batches", 0)
    synthetic = batches * micro * sequence * SYNTHETIC_BYTES_PER_TOKEN
    if not on_cpu:
        return footprint.estimate(bert).parameter_bytes + synthetic
    return footprint.estimate(bert, micro, sequence, "training", mlm_share=data["mask_probability"]).total_bytes \
        + synthetic


def _defaults(config: RunConfig, sizes: Mapping[str, int]) -> dict[str, int]:
    """Each sizing key's default (the preset's or the schema's), leaving out a vocabulary the config does not set."""
    preset = PRESETS[config["model"]["preset"]]()
    defaults = {key: getattr(preset, name) for key, name in BERT_FIELDS.items()}
    defaults["model.max_position_embeddings"] = preset.max_position_embeddings
    defaults.update({key: SCHEMA["data"][key.split(".")[1]].default for key in sizes if key.startswith("data.")})
    if not _vocab_from_config(config["data"]):
        del defaults["data.vocab_size"]
    return defaults


def _trains_on_cpu(device: str) -> bool:
    try:
        return select_device(device).type == "cpu"
    except (TypeError, ValueError):  # a device that is not here: the runner names it; only the host part is checked
        return False


def check_run_size(config: RunConfig, spelled: Mapping[str, str]) -> None:
    """Refuse, before anything is built, a run this machine cannot hold (threads, positions, memory): a ConfigError
    naming the key the size rests on, as the configuration spells it."""
    data, model, training = config["data"], config["model"], config["training"]
    threads = training["num_threads"]
    if threads is not None and threads > MAX_THREADS:
        raise ConfigError(f"{spelled['training.num_threads']} must be at most {MAX_THREADS} (4 x the "
                          f"{os.cpu_count() or 1} CPUs here), got {shown(threads)}.")
    positions, sequence = model["max_position_embeddings"], data["sequence_length"]
    if positions is not None and positions < sequence:
        raise ConfigError(f"model.max_position_embeddings ({positions}) is smaller than data.sequence_length "
                          f"({sequence}).")
    sizes = run_sizes(config)
    on_cpu = _trains_on_cpu(training["device"])

    def culprit() -> tuple[str, int]:
        key = footprint.dominant(lambda values: run_bytes(config, values, on_cpu), sizes, _defaults(config, sizes))
        return spelled.get(key, key), sizes[key]

    micro = -(-data["batch_size"] // training["gradient_accumulation_steps"])
    what = (f"to train on the CPU (float32 weights x4 with AdamW, and the activations of {micro} sequences of "
            f"{sequence} tokens)" if on_cpu else "of host memory to build the model (float32)")
    footprint.check_fits(run_bytes(config, sizes, on_cpu), what, culprit, ConfigError)
