"""The models panels open: the default pretrained one, or one by name (a checkpoint folder or a Hub repo id such as
"bert-base-uncased"), each loaded once per session: a second %bert_inspect --model NAME only draws."""

from __future__ import annotations

import functools
import threading
from typing import Any

import torch

_lock = threading.Lock()


@functools.lru_cache(maxsize=2)  # a bert-base is ~440 MB: keep the last two names, not every one ever opened
def _load_once(name: str, hub_cache: str | None) -> tuple[torch.nn.Module, Any]:
    from bertviz_lab.model.auto import load
    from bertviz_lab.widgets.panels.model_label import remember_name

    model, tokenizer = load(name, cache_dir=hub_cache)
    return remember_name(model, name), tokenizer


def named_model_and_tokenizer(name: str) -> tuple[torch.nn.Module, Any]:
    """bertviz_lab.load(name) with every head the checkpoint has, and its tokenizer, cached by name and Hub cache."""
    from bertviz_lab.model.weights import HubOptions, is_hub_name

    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a model name must be a checkpoint folder or a Hub repo id, got {name!r}.")
    name = name.strip()
    with _lock:  # HF_HOME / HF_HUB_CACHE may change within a session: the same name then means another checkpoint
        return _load_once(name, str(HubOptions().cache) if is_hub_name(name) else None)


_default_lock = threading.Lock()  # %load_ext may be loading it in the background while a panel asks for it


@functools.lru_cache(maxsize=1)
def _load_default_once() -> tuple[torch.nn.Module, Any]:
    from bertviz_lab.model.auto import load_default
    from bertviz_lab.widgets.panels.model_label import DEFAULT_MODEL_NAME, remember_name

    model, tokenizer = load_default()
    return remember_name(model, DEFAULT_MODEL_NAME), tokenizer


def default_model_and_tokenizer() -> tuple[torch.nn.Module, Any]:
    """The pretrained model the workbench opens with, loaded once per session."""
    with _default_lock:
        return _load_default_once()


def model_and_tokenizer(model: torch.nn.Module | str | None, tokenizer: Any) -> tuple[torch.nn.Module, Any]:
    """The default pretrained model when neither is given; a named checkpoint brings its own tokenizer."""
    if model is None and tokenizer is None:
        return default_model_and_tokenizer()
    if isinstance(model, str):  # a checkpoint folder or Hub repo id: the checkpoint's own tokenizer comes with it
        if tokenizer is not None:
            raise TypeError(f"model={model!r} is a name that brings its own tokenizer; leave tokenizer out.")
        return named_model_and_tokenizer(model)
    if model is None or tokenizer is None:
        raise TypeError("pass both a model and its tokenizer, or neither for the default pretrained model.")
    return model, tokenizer
