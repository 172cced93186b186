"""Models the panels open by name (a checkpoint folder or a Hub repo id such as "bert-base-uncased"), each loaded
once per session: a second %bert_inspect --model NAME or Workbench(model=NAME) only draws."""

from __future__ import annotations

import functools
import threading
from typing import Any

import torch

_lock = threading.Lock()


@functools.lru_cache(maxsize=2)  # a bert-base is ~440 MB: keep the last two names, not every one ever opened
def _load_once(name: str, hub_cache: str | None) -> tuple[torch.nn.Module, Any]:
    from bertviz_lab.model.auto import load

    return load(name, cache_dir=hub_cache)


def named_model_and_tokenizer(name: str) -> tuple[torch.nn.Module, Any]:
    """bertviz_lab.load(name) with every head the checkpoint has, and its tokenizer, cached by name and Hub cache."""
    from bertviz_lab.model.weights import HubOptions, is_hub_name

    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a model name must be a checkpoint folder or a Hub repo id, got {name!r}.")
    name = name.strip()
    with _lock:  # HF_HOME / HF_HUB_CACHE may change within a session: the same name then means another checkpoint
        return _load_once(name, str(HubOptions().cache) if is_hub_name(name) else None)
