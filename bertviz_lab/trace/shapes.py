"""Naming and describing the tensors inside module arguments and outputs (tensors, tuples, NamedTuples, dicts)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import torch

_MAX_NESTING = 4  # outputs nest a little (NamedTuple of tuples); deeper structures are not model outputs


class TensorSpec(NamedTuple):
    """Name, shape and dtype of one tensor seen at a module boundary."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @classmethod
    def of(cls, name: str, tensor: torch.Tensor) -> "TensorSpec":
        return cls(name or "0", tuple(tensor.shape), str(tensor.dtype).replace("torch.", ""))

    def __str__(self) -> str:
        return format_shape(self.shape)


def format_shape(shape: tuple[int, ...]) -> str:
    """Compact shape text, "(1,8,768)", as diagrams and tables show it."""
    return "(" + ",".join(str(int(n)) for n in shape) + ")"


def iter_tensors(value: Any, name: str = "", _level: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor inside `value` with a dotted name: NamedTuple fields, dict keys, tuple/list positions."""
    if isinstance(value, torch.Tensor):
        yield name, value
        return
    if _level >= _MAX_NESTING:
        return
    prefix = f"{name}." if name else ""
    items: Iterable[tuple[str, Any]]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        items = zip(value._fields, value)
    elif isinstance(value, Mapping):
        items = ((str(k), v) for k, v in value.items())
    elif isinstance(value, (tuple, list)):
        items = ((str(i), v) for i, v in enumerate(value))
    else:
        return
    for key, item in items:
        yield from iter_tensors(item, prefix + key, _level + 1)


def call_arguments(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Iterator[tuple[str, torch.Tensor]]:
    """Tensors of a call: positional ones named arg0, arg1, ...; keyword ones by their keyword."""
    for i, arg in enumerate(args):
        yield from iter_tensors(arg, f"arg{i}")
    for key, arg in kwargs.items():
        yield from iter_tensors(arg, key)


def format_specs(specs: tuple[TensorSpec, ...] | None) -> str:
    """Shapes of several tensors separated by commas ("-" when none)."""
    return ", ".join(str(s) for s in specs) if specs else "-"
