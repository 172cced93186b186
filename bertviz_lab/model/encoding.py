"""One way from a text (pair) to a model's batch, shared by the heads' *_from_text helpers and every widget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from bertviz_lab.util.files import shown

UNLIMITED = 10**9  # "no limit" for the tokenizer: count every token of a long text before cutting it
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class Truncation:
    """How much of a text (pair) fits the model: panels show `notice` when a long text was cut to fit."""

    kept: int  # tokens the model reads, special tokens included
    total: int  # tokens of the whole text (pair), special tokens included
    limit: int | None  # the model's maximum number of positions
    kept_a: int = 0  # text tokens of sentence A kept / in all (special tokens not counted)
    total_a: int = 0
    kept_b: int | None = None  # the same for sentence B; None without one
    total_b: int | None = None

    @property
    def cut(self) -> bool:
        """True when tokens were dropped."""
        return self.kept < self.total

    @property
    def notice(self) -> str:
        """'kept 512 of 1,873 tokens (the model reads at most 512)', with each sentence of a pair; '' when whole."""
        if not self.cut:
            return ""
        text = f"kept {self.kept:,} of {self.total:,} tokens (the model reads at most {self.limit:,})"
        if self.kept_b is not None:
            text += (f": sentence A {self.kept_a:,} of {self.total_a:,}, sentence B {self.kept_b:,} of "
                     f"{self.total_b:,} (the longer one is cut first)")
        return text


class EncodedText(tuple[Any, dict[str, torch.Tensor]]):
    """(encoding, model inputs), plus `.truncation`: what a text longer than the model lost.

    The encoding holds input_ids, token_type_ids, attention_mask and special_tokens_mask as (1, T) tensors on the
    model's device; the inputs are the first three of them, ready for `model(**inputs)`.
    """

    truncation: Truncation

    def __new__(cls, encoded: Any, inputs: dict[str, torch.Tensor], truncation: Truncation) -> "EncodedText":
        self = super().__new__(cls, (encoded, inputs))
        self.truncation = truncation
        return self

    @property
    def encoding(self) -> Any:
        """The tokenizer's encoding (with special_tokens_mask), for code that needs more than the model inputs."""
        return self[0]

    @property
    def inputs(self) -> dict[str, torch.Tensor]:
        """input_ids, attention_mask and token_type_ids: what the model's forward takes."""
        return self[1]


def max_positions(model: Any, tokenizer: Any) -> int | None:
    """How many tokens the model reads: its position embeddings, else the tokenizer's model_max_length."""
    config = getattr(model, "config", None) if model is not None else None
    limit = getattr(config, "max_positions", getattr(config, "max_position_embeddings", None))
    if limit is None:
        limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int) and 0 < limit < UNLIMITED else None


def _text_tokens(encoded: Any) -> tuple[int, int | None]:
    """Tokens of sentence A and of sentence B (None without one), special tokens not counted."""
    types = encoded["token_type_ids"][0]
    plain = encoded["special_tokens_mask"][0] == 0
    count_b = int(((types == 1) & plain).sum())
    return int(((types == 0) & plain).sum()), (count_b if bool((types == 1).any()) else None)


def check_texts(text: Any, text_b: Any = None) -> None:
    """A TypeError for a text that is not a str (or a text_b neither a str nor None), a ValueError for a blank text:
    neither gives the model anything to read. Checked before any widget holds them (a widget's own error would name
    its trait, not the argument)."""
    if not isinstance(text, str):
        raise TypeError(f"the text must be a str, got {type(text).__name__} {shown(text)}.")
    if text_b is not None and not isinstance(text_b, str):
        raise TypeError(f"text_b must be a str or None, got {type(text_b).__name__} {shown(text_b)}.")
    if not text.strip():
        raise ValueError("the text is empty; give at least one word to read.")


def _device_of(model: Any) -> torch.device:
    parameter = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
    return parameter.device if parameter is not None else torch.device("cpu")


def _too_long(total: int, limit: int, pair: bool) -> ValueError:
    what = "text pair" if pair else "text"
    return ValueError(f"the {what} is {total:,} tokens long (special tokens included) but the model reads at most "
                      f"{limit:,}; shorten it.")


def encode_text(model: Any, tokenizer: Any, text: str, text_b: str | None = None, *,
                truncate: bool = True) -> EncodedText:
    """Tokenize a text (pair) for `model` as a (1, T) batch on its device: (encoding, inputs) with `.truncation`.

    A text longer than the model's positions is cut (the longer sentence of a pair first, as Hugging Face's
    longest_first) and `.truncation` says how many tokens were kept of how many; with truncate=False it raises a
    ValueError instead. model may be None: the inputs stay on the CPU and the tokenizer's model_max_length is the
    limit. An empty text_b means no sentence B.
    """
    check_texts(text, text_b)
    text_b = text_b or None
    limit = max_positions(model, tokenizer)
    encoded = tokenizer.encode_pretraining_inputs(text, text_b, max_length=UNLIMITED)
    total = int(encoded["input_ids"].shape[1])
    total_a, total_b = _text_tokens(encoded)
    if limit is not None and total > limit:
        if not truncate:
            raise _too_long(total, limit, text_b is not None)
        encoded = tokenizer.encode_pretraining_inputs(text, text_b, max_length=limit, truncation="longest_first")
    kept_a, kept_b = _text_tokens(encoded)
    truncation = Truncation(int(encoded["input_ids"].shape[1]), total, limit, kept_a, total_a, kept_b, total_b)
    device = _device_of(model)
    encoded = {key: value.to(device) for key, value in encoded.items()}
    return EncodedText(encoded, {key: encoded[key] for key in MODEL_INPUTS}, truncation)
