"""Token strings and model inputs from what users have at hand: a list of tokens, or a tokenizer encoding."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids", "position_ids")
INPUT_ALIASES = {"segment_ids": "token_type_ids"}  # create_bert_model's name for token types


def token_rows(value: Any, tokenizer: Any) -> tuple[list[list[str]], dict[str, torch.Tensor]]:
    """Token strings per row, plus the model inputs an encoding carried, from a list of strings or an encoding."""
    if isinstance(value, str):
        raise TypeError(f"tokens must be a list of token strings (or an encoding with a tokenizer), got the str "
                        f"{value[:40]!r}; tokenize it first.")
    if isinstance(value, Mapping):
        if "input_ids" not in value:
            raise ValueError(f"the encoding has no 'input_ids' (keys: {sorted(map(str, value))}); pass the "
                             f"tokenizer's output or a list of token strings.")
        if tokenizer is None or not hasattr(tokenizer, "convert_ids_to_tokens"):
            raise ValueError(f"an encoding needs its tokenizer to turn ids into tokens: pass tokenizer=... "
                             f"(got {type(tokenizer).__name__}).")
        ids = value["input_ids"]
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        rows = ids if ids and isinstance(ids[0], (list, tuple)) else [ids]
        tokens = [list(tokenizer.convert_ids_to_tokens([int(i) for i in row])) for row in rows]
        inputs = {}
        for key in (*INPUT_NAMES, *INPUT_ALIASES):
            if value.get(key) is not None:
                tensor = torch.as_tensor(value[key]).detach().to("cpu", copy=True)
                inputs[INPUT_ALIASES.get(key, key)] = tensor if tensor.dim() == 2 else tensor.reshape(1, -1)
        return tokens, inputs
    if isinstance(value, (list, tuple)) and value and all(isinstance(t, str) for t in value):
        return [list(value)], {}
    if (isinstance(value, (list, tuple)) and value
            and all(isinstance(r, (list, tuple)) and all(isinstance(t, str) for t in r) for r in value)):
        return [list(r) for r in value], {}
    raise TypeError(f"tokens must be a list of token strings, a list of such lists (one per batch row), or a "
                    f"tokenizer encoding with tokenizer=...; got {type(value).__name__} {str(value)[:60]!r}.")
