"""BERTConfig: every hyper-parameter of a BERT model, validated, and convertible to and from HF config.json."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from bertviz_lab.model.families import MODEL_TYPES, family_of
from bertviz_lab.util.fields import MAX_INT, Field, check_fields, setting
from bertviz_lab.util.files import as_path, json_kind, named, present, read_json, shown

TANH_GELU_NAMES = ("gelu_new", "gelu_pytorch_tanh")  # Hugging Face's names for GELU's tanh approximation
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": torch.nn.functional.gelu,
    **{name: lambda x: torch.nn.functional.gelu(x, approximate="tanh") for name in TANH_GELU_NAMES},
    "relu": torch.nn.functional.relu,
    "silu": torch.nn.functional.silu,
    "swish": torch.nn.functional.silu,
    "tanh": torch.tanh,
}
POSITION_EMBEDDING_TYPES = ("absolute", "sinusoidal")

# HF config.json keys whose name differs from ours (ours -> theirs).
_HF_RENAMES = {"tie_word_embedding": "tie_word_embeddings"}
# HF keys that describe the file, not the model; dropped on read.
_HF_IGNORED = {
    "architectures", "transformers_version", "torch_dtype", "dtype", "gradient_checkpointing",
    "label2id", "_name_or_path", "problem_type", "output_past",
}


COUNT = Field(int, ge=1, le=MAX_INT)  # a size: at least 1, at most what a tensor can hold
TOKEN_ID = Field(int, nullable=True, ge=0, le=MAX_INT)
PROBABILITY = Field(float, ge=0.0, lt=1.0)
POSITIVE = Field(float, gt=0.0)
FLAG = Field(bool)


def _field(default: Any, check: Field) -> Any:
    """A BERTConfig field: its default and its check, in one place."""
    return setting(dataclasses.replace(check, default=default))


def _read_id2label(value: Any) -> Any:
    """config.json's id2label ({"0": "O", ...}) with int ids; None when it only holds the default LABEL_i names."""
    if not isinstance(value, dict):
        return value  # validate() names the bad value
    try:
        labels = {int(i): name for i, name in value.items()}
    except (TypeError, ValueError):
        raise ValueError(f"config.json id2label must map label ids to names, got keys {shown(list(value))}.") from None
    return None if labels == {i: f"LABEL_{i}" for i in range(len(labels))} else labels


def _described(value: Any) -> str:
    """A value with its type, for errors about a wrong type ("str '0.1'")."""
    return f"{type(value).__name__} {shown(value)}"


@dataclass
class BERTConfig:
    """Hyper-parameters of a BERT model; defaults are bert-base-uncased."""

    vocab_size: int = _field(30522, COUNT)
    hidden_size: int = _field(768, COUNT)
    num_attention_heads: int = _field(12, COUNT)
    num_hidden_layers: int = _field(12, COUNT)
    intermediate_size: int = _field(3072, COUNT)
    hidden_act: str | Callable[[torch.Tensor], torch.Tensor] = "gelu"
    hidden_dropout_prob: float = _field(0.1, PROBABILITY)
    attention_probs_dropout_prob: float = _field(0.1, PROBABILITY)
    max_position_embeddings: int = _field(512, COUNT)
    tie_word_embedding: bool = _field(True, FLAG)
    type_vocab_size: int = _field(2, COUNT)
    initializer_range: float = _field(0.02, POSITIVE)
    layer_norm_eps: float = _field(1e-12, POSITIVE)
    use_cache: bool = _field(True, FLAG)
    is_decoder: bool = _field(False, FLAG)
    add_cross_attention: bool = _field(False, FLAG)
    chunk_size_feed_forward: int = _field(0, dataclasses.replace(COUNT, ge=0))
    pad_token_id: int | None = _field(0, TOKEN_ID)
    bos_token_id: int | None = _field(None, TOKEN_ID)
    eos_token_id: int | None = _field(None, TOKEN_ID)
    classifier_dropout: float | None = _field(None, dataclasses.replace(PROBABILITY, nullable=True))
    add_pooling_layer: bool = _field(True, FLAG)
    position_embedding_type: str = _field("absolute", Field(str, choices=POSITION_EMBEDDING_TYPES))
    num_labels: int = _field(2, COUNT)
    id2label: dict[int, str] | None = None  # names of the classifier's outputs; None: LABEL_0, LABEL_1, ...
    # the BERT relative this is (families.py): its embeddings, heads and checkpoint names
    model_type: str = _field("bert", Field(str, choices=MODEL_TYPES))
    # ELECTRA: the width of the embeddings when it differs from hidden_size (then projected up); None: hidden_size
    embedding_size: int | None = _field(None, dataclasses.replace(COUNT, nullable=True))
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise a TypeError (wrong type) or ValueError (wrong value) naming the first field that cannot work."""
        check_fields(self, "BERTConfig")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BERTConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})."
            )
        if self.add_cross_attention and not self.is_decoder:
            raise ValueError("BERTConfig.add_cross_attention=True needs is_decoder=True: "
                             "cross-attention only exists in a decoder.")
        if not callable(self.hidden_act):
            self._check_choice("hidden_act", tuple(sorted(ACTIVATIONS)), "a callable or one of")
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"BERTConfig.pad_token_id ({self.pad_token_id}) must lie in "
                             f"[0, vocab_size={self.vocab_size}).")
        self._check_id2label()
        if not isinstance(self.extra, dict):
            raise TypeError(f"BERTConfig.extra must be a dict of extra config.json keys, got {_described(self.extra)}.")

    def _check_id2label(self) -> None:
        """id2label names every classifier output 0..num_labels-1 once, with a str."""
        labels = self.id2label
        if labels is None:
            return
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise TypeError(f"BERTConfig.id2label must be None or a dict of int -> str, got {_described(labels)}.")
        if sorted(labels) != list(range(self.num_labels)):
            raise ValueError(f"BERTConfig.id2label must name the labels 0..{self.num_labels - 1} "
                             f"(num_labels={self.num_labels}), got ids {shown(sorted(labels, key=str))}.")

    def label_names(self) -> list[str]:
        """The name of each classifier output, from id2label (Hugging Face's LABEL_i where none is given)."""
        return [(self.id2label or {}).get(i, f"LABEL_{i}") for i in range(self.num_labels)]

    def _check_choice(self, name: str, choices: tuple[str, ...], expected: str = "one of") -> None:
        value = getattr(self, name)
        if not isinstance(value, str):
            raise TypeError(f"BERTConfig.{name} must be {expected} {choices}, got {_described(value)}.")
        if value not in choices:
            raise ValueError(f"BERTConfig.{name} must be {expected} {choices}, got {shown(value)}.")

    @property
    def embedding_width(self) -> int:
        """Width of the token embeddings (ELECTRA's embedding_size, else hidden_size)."""
        return self.embedding_size or self.hidden_size

    @property
    def max_positions(self) -> int:
        """How many tokens one sequence may hold (RoBERTa spends padding_idx + 1 positions before the first)."""
        if family_of(self).positions_after_padding:
            return self.max_position_embeddings - (self.pad_token_id or 0) - 1
        return self.max_position_embeddings

    @property
    def head_size(self) -> int:
        """Width of one attention head."""
        return self.hidden_size // self.num_attention_heads

    def activation(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The feed-forward activation as a function."""
        return self.hidden_act if callable(self.hidden_act) else ACTIVATIONS[self.hidden_act]

    @property
    def gelu_form(self) -> str | None:
        """"erf" or "tanh" where the activation is GELU in that form, else None (a callable, ReLU, ...): what the
        kernels' GEMM epilogues need to know to compute the activation themselves."""
        if isinstance(self.hidden_act, str) and self.hidden_act in TANH_GELU_NAMES:
            return "tanh"
        return "erf" if self.hidden_act == "gelu" else None

    # presets -----------------------------------------------------------------------------------------
    @classmethod
    def base(cls, **overrides: Any) -> "BERTConfig":
        """BERT-base: 12 layers, 768 wide, 12 heads (110M parameters)."""
        return cls(**overrides)

    @classmethod
    def large(cls, **overrides: Any) -> "BERTConfig":
        """BERT-large: 24 layers, 1024 wide, 16 heads (340M parameters)."""
        values = dict(hidden_size=1024, num_attention_heads=16, num_hidden_layers=24, intermediate_size=4096)
        return cls(**{**values, **overrides})

    @classmethod
    def tiny(cls, **overrides: Any) -> "BERTConfig":
        """A 2-layer, 128-wide BERT that trains in seconds on a CPU, for tests and demos."""
        values = dict(hidden_size=128, num_attention_heads=2, num_hidden_layers=2, intermediate_size=512,
                      max_position_embeddings=128)
        return cls(**{**values, **overrides})

    # HF config.json ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """HF-compatible dictionary (a callable activation is not serialisable and raises)."""
        if callable(self.hidden_act):
            raise ValueError("BERTConfig.hidden_act is a callable and cannot be written to config.json; "
                             "use a name such as 'gelu'.")
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("extra", "id2label")}
        if self.embedding_size is None:
            del data["embedding_size"]
        family = family_of(self)
        renames = {**_HF_RENAMES, **family.config_keys}
        if family.model_type == "distilbert":
            data["sinusoidal_pos_embds"] = data.pop("position_embedding_type") == "sinusoidal"
        data = {renames.get(k, k): v for k, v in data.items()}
        if self.id2label is not None:  # JSON keys are strings, as transformers writes them
            data["id2label"] = {str(i): name for i, name in sorted(self.id2label.items())}
            data["label2id"] = {name: i for i, name in sorted(self.id2label.items())}
        return {**self.extra, **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BERTConfig":
        """Build from an HF config dictionary; unknown keys are kept in `extra` and written back."""
        if not isinstance(data, dict):
            raise TypeError(f"BERTConfig.from_dict needs a dict (a config.json object), got {type(data).__name__}.")
        model_type = data.get("model_type", "bert")
        if model_type not in MODEL_TYPES:
            raise ValueError(f"config model_type is {shown(model_type)}, expected 'bert' or one of its relatives "
                             f"{MODEL_TYPES[1:]} (other models: bertviz_lab.views shows their attention).")
        family = family_of(model_type)
        inverse = {v: k for k, v in {**_HF_RENAMES, **family.config_keys}.items()}
        data = {**{family.config_keys.get(k, k): v for k, v in family.config_defaults.items()}, **data}
        if not family.pooler and "add_pooling_layer" not in data:
            data["add_pooling_layer"] = False
        if family.model_type == "distilbert" and "sinusoidal_pos_embds" in data:  # a flag there, a choice here
            data["position_embedding_type"] = "sinusoidal" if data.pop("sinusoidal_pos_embds") else "absolute"
        architectures = data.get("architectures")
        if architectures is not None and (not isinstance(architectures, list)
                                          or not all(isinstance(name, str) for name in architectures)):
            raise ValueError(f"config architectures must be a list of transformers class names such as "
                             f"[\"BertForMaskedLM\"], got {_described(architectures)}.")
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known, extra = {}, {}
        for key, value in data.items():
            ours = inverse.get(key, key)
            if ours in names:
                known[ours] = value
            elif key not in _HF_IGNORED:
                extra[key] = value
        if "id2label" in data:
            known["id2label"] = _read_id2label(data["id2label"])
            if "num_labels" not in data and isinstance(data["id2label"], dict):
                known["num_labels"] = len(data["id2label"])
        return cls(**known, extra=extra)

    def save_pretrained(self, directory: str | os.PathLike[str], architectures: list[str] | None = None) -> Path:
        """Write config.json into `directory` (`architectures` names the transformers class that should load it)."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        data = self.to_dict()
        if architectures:
            data["architectures"] = list(architectures)
        out = path / "config.json"
        out.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        return out

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str]) -> "BERTConfig":
        """Read config.json from a file or a checkpoint folder; errors name the file (only a regular file of bounded
        size is read: see files.py)."""
        path = as_path(path, "a config.json file or a checkpoint folder holding one")
        file = path / "config.json" if present(path) and path.is_dir() else path
        if not present(file):
            raise FileNotFoundError(f"No config.json at {named(file)}: expected a BERT checkpoint folder with a "
                                    f"config.json.")
        data = read_json(file)
        if not isinstance(data, dict):
            raise ValueError(f"config.json in {named(file.parent)} holds a {json_kind(data)}, expected a JSON object.")
        try:
            return cls.from_dict(data)
        except TypeError as error:
            raise TypeError(f"{named(file)}: {error}") from None
        except ValueError as error:
            raise ValueError(f"{named(file)}: {error}") from None
