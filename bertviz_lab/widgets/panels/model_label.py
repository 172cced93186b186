"""What a panel calls its model: the name it was loaded by (a checkpoint folder or Hub repo id, or the default
model's name), its size in parameters and its layers × heads, for the Workbench's header and export captions."""

from __future__ import annotations

import weakref
from typing import Any

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"  # BERT_Weights.DEFAULT, as its model card names it
_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> the name it was loaded by


def remember_name(model: Any, name: str) -> Any:
    """Note the name `model` was loaded by (panels show it); returns the model."""
    try:
        _names[model] = str(name)
    except TypeError:  # an object that takes no weak reference: it keeps its class name
        pass
    return model


def model_name(model: Any) -> str:
    """The name `model` was loaded by, else its `name_or_path` (Hugging Face models), else its class name."""
    if model is None:
        return ""
    try:
        remembered = _names.get(model)
    except TypeError:
        remembered = None
    named = remembered or getattr(model, "name_or_path", None)
    return str(named) if named else type(model).__name__


def parameter_count(model: Any) -> int:
    """How many numbers the model learns (shared tensors, such as tied embeddings, counted once)."""
    parameters = getattr(model, "parameters", None)
    if not callable(parameters):
        return 0
    return sum(p.numel() for p in {id(p): p for p in parameters()}.values())


def count_text(count: int) -> str:
    """22713216 -> "22.7 M parameters"; small counts as they are."""
    for size, unit in ((10**9, "B"), (10**6, "M"), (10**3, "k")):
        if count >= size:
            return f"{count / size:.1f} {unit} parameters"
    return f"{count} parameter{'s' if count != 1 else ''}"


def shape_text(model: Any) -> str:
    """"6 layers × 12 heads" from the model's config ("" when it has none)."""
    config = getattr(model, "config", None)
    layers = getattr(config, "num_hidden_layers", None)
    heads = getattr(config, "num_attention_heads", None)
    if not isinstance(layers, int) or not isinstance(heads, int):
        return ""
    return f"{layers} layer{'s' if layers != 1 else ''} × {heads} head{'s' if heads != 1 else ''}"


def model_summary(model: Any) -> str:
    """"all-MiniLM-L6-v2 · 22.7 M parameters · 6 layers × 12 heads": which model is loaded and what it has."""
    if model is None:
        return ""
    parts = [model_name(model), count_text(parameter_count(model)), shape_text(model)]
    return " · ".join(part for part in parts if part)
