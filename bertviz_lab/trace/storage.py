"""What a trace keeps of a tensor: detached CPU copies of the chosen batch rows and heads, within a byte budget."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


class TraceSizeError(ValueError):
    """A trace would hold more bytes than its max_bytes allows."""


def index_list(value: Any, name: str, size: int | None = None, owner: str = "") -> list[int] | None:
    """None, an int or ints -> sorted unique non-negative list; out-of-range or non-int values name the option."""
    if value is None:
        return None
    items = [value] if isinstance(value, int) else value
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise TypeError(f"{name} must be None, an int or a list of ints, got {value!r}.")
    items = list(items)
    if not items or any(isinstance(i, bool) or not isinstance(i, int) for i in items):
        raise TypeError(f"{name} must be None, an int or a non-empty list of ints, got {value!r}.")
    if size is None:
        if any(i < 0 for i in items):
            raise ValueError(f"{name}={value!r} has a negative index; give indices counted from 0.")
        return sorted(set(items))
    bad = [i for i in items if not -size <= i < size]
    if bad:
        raise ValueError(f"{name}={value!r} is out of range: {owner} has {size} {name} (valid: 0..{size - 1}, or "
                         f"negative from the end).")
    return sorted({i % size for i in items})


def _selector(indices: list[int] | None) -> slice | torch.Tensor | None:
    """A view-making slice for a run of consecutive indices, else an index tensor."""
    if indices is None:
        return None
    if indices == list(range(indices[0], indices[-1] + 1)):
        return slice(indices[0], indices[-1] + 1)
    return torch.tensor(indices)


class Storage:
    """Keeps the chosen rows (and heads) of tensors as detached CPU tensors, counting their bytes."""

    def __init__(self, heads: list[int] | None, batch_index: list[int] | None, max_bytes: int | None) -> None:
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0):
            raise ValueError(f"max_bytes must be a positive int (bytes) or None for no limit, got {max_bytes!r}.")
        self.heads, self.batch_index, self.max_bytes = heads, batch_index, max_bytes
        self.nbytes = 0
        self._head_sel, self._batch_sel = _selector(heads), _selector(batch_index)

    def keep(self, tensor: torch.Tensor, what: str, batch_dim: bool, heads: bool = False,
             copy: bool = True) -> torch.Tensor:
        """A detached CPU copy of the selected rows (and heads), counted against max_bytes; without `copy`, a whole
        CPU tensor nobody else holds is kept as it is (a selection of it is still copied: a view would pin it all)."""
        x, fresh = tensor.detach(), False
        if batch_dim and self.batch_index is not None:
            if self.batch_index[-1] >= x.shape[0]:
                raise ValueError(f"batch_index={self.batch_index!r} is out of range for a batch of {x.shape[0]}.")
            fresh = isinstance(self._batch_sel, torch.Tensor)
            x = x[self._batch_sel]
        if heads and self.heads is not None:
            fresh = fresh or isinstance(self._head_sel, torch.Tensor)
            x = x[:, self._head_sel]
        needed = x.numel() * x.element_size()
        if self.max_bytes is not None and self.nbytes + needed > self.max_bytes:
            raise TraceSizeError(
                f"trace(max_bytes={self.max_bytes}) exceeded: keeping the {what} ({needed:,} bytes, shape "
                f"{tuple(x.shape)}) would bring the trace to {self.nbytes + needed:,} bytes. Pass a larger max_bytes "
                f"(or max_bytes=None for no limit), or record less with layers=, heads=, batch_index=, "
                f"hidden_states=False or qkv/context/mlp=False.")
        self.nbytes += needed
        whole = not copy and x.numel() == tensor.numel()
        return x if (fresh or whole) and x.device.type == "cpu" else x.to("cpu", copy=True)
