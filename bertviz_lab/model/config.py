"""BERTConfig: every hyper-parameter of a BERT model, validated, and convertible to and from HF config.json."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

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
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "gradient_checkpointing",
    "id2label", "label2id", "_name_or_path", "problem_type", "output_past",
}


@dataclass
class BERTConfig:
    """Hyper-parameters of a BERT model; defaults are bert-base-uncased."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_attention_heads: int = 12
    num_hidden_layers: int = 12
    intermediate_size: int = 3072
    hidden_act: str | Callable[[torch.Tensor], torch.Tensor] = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    tie_word_embedding: bool = True
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    use_cache: bool = True
    is_decoder: bool = False
    add_cross_attention: bool = False
    chunk_size_feed_forward: int = 0
    pad_token_id: int | None = 0
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    classifier_dropout: float | None = None
    add_pooling_layer: bool = True
    position_embedding_type: str = "absolute"
    num_labels: int = 2
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise a ValueError naming the first field that cannot work."""
        for name in ("vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size", "num_labels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"BERTConfig.{name} must be a positive integer, got {value!r}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BERTConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})."
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"BERTConfig.{name} must be in [0, 1), got {getattr(self, name)!r}.")
        if self.classifier_dropout is not None and not 0.0 <= self.classifier_dropout < 1.0:
            raise ValueError(f"BERTConfig.classifier_dropout must be None or in [0, 1), got {self.classifier_dropout!r}.")
        if self.initializer_range <= 0:
            raise ValueError(f"BERTConfig.initializer_range must be positive, got {self.initializer_range!r}.")
        if self.layer_norm_eps <= 0:
            raise ValueError(f"BERTConfig.layer_norm_eps must be positive, got {self.layer_norm_eps!r}.")
        if self.chunk_size_feed_forward < 0:
            raise ValueError(f"BERTConfig.chunk_size_feed_forward must be >= 0, got {self.chunk_size_feed_forward!r}.")
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ValueError(
                f"BERTConfig.position_embedding_type must be one of {POSITION_EMBEDDING_TYPES}, "
                f"got {self.position_embedding_type!r}."
            )
        if self.add_cross_attention and not self.is_decoder:
            raise ValueError("BERTConfig.add_cross_attention=True needs is_decoder=True: cross-attention only exists in a decoder.")
        if not callable(self.hidden_act) and self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"BERTConfig.hidden_act must be a callable or one of {sorted(ACTIVATIONS)}, got {self.hidden_act!r}.")
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"BERTConfig.pad_token_id ({self.pad_token_id}) must lie in [0, vocab_size={self.vocab_size}).")

    @property
    def head_size(self) -> int:
        """Width of one attention head."""
        return self.hidden_size // self.num_attention_heads

    def activation(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The feed-forward activation as a function."""
        return self.hidden_act if callable(self.hidden_act) else ACTIVATIONS[self.hidden_act]

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
            raise ValueError("BERTConfig.hidden_act is a callable and cannot be written to config.json; use a name such as 'gelu'.")
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        data = {_HF_RENAMES.get(k, k): v for k, v in data.items()}
        data["model_type"] = "bert"
        return {**self.extra, **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BERTConfig":
        """Build from an HF config dictionary; unknown keys are kept in `extra` and written back."""
        inverse = {v: k for k, v in _HF_RENAMES.items()}
        if data.get("model_type", "bert") != "bert":
            raise ValueError(f"config model_type is {data['model_type']!r}, expected 'bert'.")
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known, extra = {}, {}
        for key, value in data.items():
            ours = inverse.get(key, key)
            if ours in names:
                known[ours] = value
            elif key not in _HF_IGNORED:
                extra[key] = value
        if "id2label" in data and "num_labels" not in data:
            known["num_labels"] = len(data["id2label"])
        return cls(**known, extra=extra)

    def save_pretrained(self, directory: str | os.PathLike, architectures: list[str] | None = None) -> Path:
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
    def from_pretrained(cls, path: str | os.PathLike) -> "BERTConfig":
        """Read config.json from a file or a checkpoint folder."""
        path = Path(path)
        file = path / "config.json" if path.is_dir() else path
        if not file.is_file():
            raise FileNotFoundError(f"No config.json at {file}: expected a BERT checkpoint folder with a config.json.")
        try:
            data = json.loads(file.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{file} is not valid JSON: {error}") from error
        return cls.from_dict(data)
