"""HookPoint: a named place in the model where hooks read, or replace, one intermediate tensor; `hooks()` and
`run_with_cache()` use them the way TransformerLens does, with our names.

Names (relative to the model they are listed from; a task model prefixes the backbone's with `bert.`):
    embeddings.hidden                                  (B, T, C)      embeddings output
    encoder.layer.{i}.attention.self.{q,k,v}           (B, nh, T, hs) queries, keys, values per head
    encoder.layer.{i}.attention.self.probs             (B, nh, T, S)  attention probabilities
    encoder.layer.{i}.attention.self.context           (B, nh, T, hs) each head's output, before the projection
    encoder.layer.{i}.crossattention.self.{...}        the same five for cross-attention (decoders)
    encoder.layer.{i}.intermediate.act                 (B, T, I)      the feed-forward layer after its activation
    encoder.layer.{i}.hidden                           (B, T, C)      residual stream after layer i

A hook is `hook(tensor, point) -> tensor | None`: what it returns (not None) replaces the tensor. As in
TransformerLens a HookPoint is an identity module and a hook on it an ordinary forward hook, so anything that hooks
modules can watch it too, and a handle removes exactly its own hook. A point nobody watches costs one module call;
a watched point makes its layer compute that tensor the plain way (a watched `probs` point: the attention written
out; bertviz_lab.model.layers), so hooks see and may replace it.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Union

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

Hook = Callable[[torch.Tensor, "HookPoint"], "torch.Tensor | None"]
NamesFilter = Union[str, Iterable[str], Callable[[str], bool], None]  # a name, names, a predicate, or None (all)


class HookPoint(nn.Module):
    """Identity module that marks a tensor worth observing; `name` is its key in `hook_points(model)`."""

    def __init__(self, name: str = "") -> None:
        super().__init__()
        self.name = name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    if TYPE_CHECKING:  # nn.Module's __call__ answers Any; a point hands back a tensor (its hooks' replacement)
        def __call__(self, x: torch.Tensor) -> torch.Tensor: ...

    def add_hook(self, hook: Hook) -> RemovableHandle:
        """Call `hook(x, self)` on every forward; what it returns (not None) replaces x. The handle's `remove()`
        takes it off again."""

        def forward_hook(point: HookPoint, args: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor | None:
            return hook(output, point)

        return self.register_forward_hook(forward_hook)

    @property
    def is_watched(self) -> bool:
        """True when any hook is registered on this point (its layer then computes the tensor the plain way)."""
        return bool(self._forward_hooks or self._forward_pre_hooks)

    def extra_repr(self) -> str:
        return repr(self.name) if self.name else ""


def hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """Every HookPoint of `model` by dotted name, in model order (TransformerLens' `hook_dict`); each point's
    `name` is set to its key here."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    points = {name: module for name, module in model.named_modules() if isinstance(module, HookPoint)}
    for name, point in points.items():
        if point.name != name:  # nn.Module's attribute setting is slow: a trace lists the points on every entry
            point.name = name
    return points


def names_matching(points: dict[str, HookPoint], names_filter: NamesFilter) -> list[str]:
    """The names `names_filter` selects, in model order; a name that is no hook point is an error naming the
    nearest ones."""
    if names_filter is None:
        return list(points)
    if callable(names_filter):
        return [name for name in points if names_filter(name)]
    wanted = [names_filter] if isinstance(names_filter, str) else list(names_filter)
    for name in wanted:
        if not isinstance(name, str):
            raise TypeError(f"a hook point name must be a str, got {type(name).__name__}: {name!r}.")
        if name not in points:
            near = difflib.get_close_matches(name, points, n=3)
            raise KeyError(f"no hook point named {name!r}" + (f"; did you mean {', '.join(near)}?" if near else
                                                                f"; there are {len(points)}, see hook_points(model)."))
    chosen = set(wanted)
    return [name for name in points if name in chosen]


@contextlib.contextmanager
def hooks(model: nn.Module, fwd_hooks: Iterable[tuple[NamesFilter, Hook]], *,
          points: dict[str, HookPoint] | None = None) -> Iterator[nn.Module]:
    """Inside the block each `(name_or_filter, hook)` is on every point it selects; on exit, also after an error,
    exactly these hooks are removed (nested blocks compose). Yields the model. `points`: `hook_points(model)` where
    the caller has it already."""
    points = hook_points(model) if points is None else points
    chosen = []
    for pair in fwd_hooks:
        if not isinstance(pair, tuple) or len(pair) != 2 or not callable(pair[1]):
            raise TypeError(f"hooks() takes (name_or_filter, hook) pairs with a callable hook, got {pair!r}.")
        chosen += [(points[name], pair[1]) for name in names_matching(points, pair[0])]
    handles: list[RemovableHandle] = []
    try:
        for point, hook in chosen:
            handles.append(point.add_hook(hook))
        yield model
    finally:
        for handle in reversed(handles):
            handle.remove()


class ActivationCache(dict[str, torch.Tensor]):
    """The tensors a forward pass left at its hook points, keyed by hook name (detached copies)."""

    def __missing__(self, key: Any) -> torch.Tensor:
        near = difflib.get_close_matches(str(key), self, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else f"; it holds {len(self)} names."
        raise KeyError(f"{key!r} is not in this cache{hint}")

    def __repr__(self) -> str:
        names = ", ".join(list(self)[:3]) + (", ..." if len(self) > 3 else "")
        return f"ActivationCache({len(self)} hook points: {names})"


def caching_hook(cache: dict[str, torch.Tensor], device: str | torch.device | None = None) -> Hook:
    """A hook that keeps a detached copy of each tensor in `cache` under its point's name (on `device`, default
    where it is)."""
    target = None if device is None else torch.device(device)

    def read(tensor: torch.Tensor, point: HookPoint) -> None:
        cache[point.name] = tensor.detach().to(target or tensor.device, copy=True)

    return read


def run_with_cache(model: nn.Module, *model_args: Any, names_filter: NamesFilter = None,
                   device: str | torch.device | None = None, **model_kwargs: Any) -> tuple[Any, ActivationCache]:
    """`model(*model_args, **model_kwargs)` and an ActivationCache of the hook points `names_filter` selects (all
    by default), each a detached copy on `device` (default: where the model computed it)."""
    cache = ActivationCache()
    with hooks(model, [(names_filter, caching_hook(cache, device))]):
        output = model(*model_args, **model_kwargs)
    return output, cache
