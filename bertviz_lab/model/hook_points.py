"""HookPoint: a named place in the model where hooks read, or replace, one intermediate tensor; `hooks()` and
`run_with_cache()` use them the way TransformerLens does, with our names.

Names (relative to the model they are listed from; a task model prefixes the backbone's with `bert.`):
    embeddings.hidden                                  (B, T, C)      embeddings output
    encoder.layer.{i}.attention.self.{q,k,v}           (B, nh, T, hs) queries, keys, values per head
    encoder.layer.{i}.attention.self.probs             (B, nh, T, S)  attention probabilities
    encoder.layer.{i}.attention.self.context           (B, nh, T, hs) each head's output, before the projection
    encoder.layer.{i}.attention.output.head_out        (B, nh, T, C)  each head's share of attn_out (no bias), only
                                                                      formed while watched
    encoder.layer.{i}.attention.output.attn_out        (B, T, C)      attention output before the residual add
    encoder.layer.{i}.crossattention.{self.*,output.*} the same seven for cross-attention (decoders)
    encoder.layer.{i}.resid_mid                        (B, T, C)      residual stream the feed-forward reads
    encoder.layer.{i}.intermediate.act                 (B, T, I)      the feed-forward layer after its activation
    encoder.layer.{i}.output.mlp_out                   (B, T, C)      feed-forward output before the residual add
    encoder.layer.{i}.hidden                           (B, T, C)      residual stream after layer i

A hook is `hook(tensor, point) -> tensor | None`: what it returns (not None) replaces the tensor. A backward hook is
`hook(grad, point) -> grad | None` on the gradient of the tensor the point handed on. As in
TransformerLens a HookPoint is an identity module and a hook on it an ordinary forward hook, so anything that hooks
modules can watch it too, and a handle removes exactly its own hook. A point nobody watches costs one module call;
a watched point makes its layer compute that tensor the plain way (a watched `probs` point: the attention written
out; bertviz_lab.model.layers), so hooks see and may replace it.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, Union

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

Hook = Callable[[torch.Tensor, "HookPoint"], "torch.Tensor | None"]
GRAD_SUFFIX = "_grad"  # a point's gradient in an ActivationCache: NAME + "_grad", as TransformerLens names it
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

    def add_backward_hook(self, hook: Hook) -> BackwardHookHandle:
        """Call `hook(grad, self)` with the gradient of each tensor this point hands on (after the forward hooks
        registered before this one), when a backward pass reaches it; what it returns (not None) replaces the
        gradient. Only tensors that require grad have one. The handle's `remove()` takes it off, also from tensors
        of forwards already run."""
        handle = BackwardHookHandle()

        def forward_hook(point: HookPoint, args: tuple[Any, ...], output: torch.Tensor) -> None:
            if output.requires_grad:
                on_grad = output.register_hook(lambda grad: hook(grad, point))  # type: ignore[no-untyped-call]
                handle.tensor_handles.append(on_grad)  # (Tensor.register_hook is unannotated in torch)

        handle.forward_handle = self.register_forward_hook(forward_hook)
        return handle

    @property
    def is_watched(self) -> bool:
        """True when any hook is registered on this point (its layer then computes the tensor the plain way)."""
        return bool(self._forward_hooks or self._forward_pre_hooks)

    def extra_repr(self) -> str:
        return repr(self.name) if self.name else ""


class Removable(Protocol):
    def remove(self) -> None: ...


class BackwardHookHandle:
    """Removes a backward hook: the forward hook that puts it on each tensor, and it from the tensors it is on."""

    def __init__(self) -> None:
        self.forward_handle: RemovableHandle | None = None
        self.tensor_handles: list[RemovableHandle] = []

    def remove(self) -> None:
        if self.forward_handle is not None:
            self.forward_handle.remove()
        for handle in self.tensor_handles:
            handle.remove()
        self.tensor_handles.clear()


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


def _selected(points: dict[str, HookPoint], pairs: Iterable[tuple[NamesFilter, Hook]],
              argument: str) -> list[tuple[HookPoint, Hook]]:
    """(point, hook) for every point each `(name_or_filter, hook)` pair selects."""
    chosen = []
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2 or not callable(pair[1]):
            raise TypeError(f"hooks() takes (name_or_filter, hook) pairs with a callable hook in {argument}, "
                            f"got {pair!r}.")
        chosen += [(points[name], pair[1]) for name in names_matching(points, pair[0])]
    return chosen


@contextlib.contextmanager
def hooks(model: nn.Module, fwd_hooks: Iterable[tuple[NamesFilter, Hook]] = (), *,
          bwd_hooks: Iterable[tuple[NamesFilter, Hook]] = (),
          points: dict[str, HookPoint] | None = None) -> Iterator[nn.Module]:
    """Inside the block each `(name_or_filter, hook)` of `fwd_hooks` is on every point it selects, and each of
    `bwd_hooks` on the gradients of those points' tensors (`hook(grad, point)`, see HookPoint.add_backward_hook); on
    exit, also after an error, exactly these hooks are removed (nested blocks compose). Yields the model. `points`:
    `hook_points(model)` where the caller has it already."""
    points = hook_points(model) if points is None else points
    forward = _selected(points, fwd_hooks, "fwd_hooks")
    backward = _selected(points, bwd_hooks, "bwd_hooks")
    if backward and torch.is_inference_mode_enabled():
        raise RuntimeError("bwd_hooks need autograd, which torch.inference_mode() turns off for good; run the "
                           "block outside inference_mode (torch.no_grad() can be undone with torch.enable_grad()).")
    handles: list[Removable] = []
    try:
        for point, hook in forward:
            handles.append(point.add_hook(hook))
        for point, hook in backward:  # after the forward hooks: they see the gradient of what those handed on
            handles.append(point.add_backward_hook(hook))
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
                   device: str | torch.device | None = None, incl_bwd: bool = False,
                   metric: Callable[[Any], torch.Tensor] | None = None,
                   **model_kwargs: Any) -> tuple[Any, ActivationCache]:
    """`model(*model_args, **model_kwargs)` and an ActivationCache of the hook points `names_filter` selects (all
    by default), each a detached copy on `device` (default: where the model computed it).

    `incl_bwd=True` also differentiates `metric(output)` (a scalar tensor) with respect to each cached point's
    tensor and caches that gradient under `NAME + "_grad"`. The forward then runs with grad enabled even inside
    `torch.no_grad()` (the gradients were asked for), and the gradients are taken with `torch.autograd.grad`, so
    no parameter's `.grad` changes; a point whose tensor does not depend on the parameters (a frozen model) is
    made a leaf that requires grad, with the same values."""
    if not incl_bwd:
        if metric is not None:
            raise ValueError("metric= is only used with incl_bwd=True (the gradients of metric(output)).")
        cache = ActivationCache()
        with hooks(model, [(names_filter, caching_hook(cache, device))]):
            output = model(*model_args, **model_kwargs)
        return output, cache
    if metric is None or not callable(metric):
        raise ValueError("incl_bwd=True needs metric=, a function of the model's output that returns the scalar "
                         "tensor to differentiate (e.g. lambda out: out.logits[0, -1].max()).")
    if torch.is_inference_mode_enabled():
        raise RuntimeError("run_with_cache(incl_bwd=True) needs autograd, which torch.inference_mode() turns off "
                           "for good; call it outside inference_mode (inside torch.no_grad() is fine).")
    return _run_with_gradients(model, model_args, model_kwargs, names_filter, device, metric)


def _run_with_gradients(model: nn.Module, model_args: tuple[Any, ...], model_kwargs: dict[str, Any],
                        names_filter: NamesFilter, device: str | torch.device | None,
                        metric: Callable[[Any], torch.Tensor]) -> tuple[Any, ActivationCache]:
    """The forward with every selected point's tensor kept (as a graph node that requires grad), then
    d metric / d tensor for each of them, cached as NAME + "_grad"."""
    cache = ActivationCache()
    keep = caching_hook(cache, device)
    tensors: dict[str, torch.Tensor] = {}

    def read(tensor: torch.Tensor, point: HookPoint) -> torch.Tensor | None:
        keep(tensor, point)
        if not tensor.is_floating_point():
            return None
        if not tensor.requires_grad:  # nothing before it needs a gradient: start the graph here, same values
            tensor = tensor.detach().requires_grad_()
        tensors[point.name] = tensor
        return tensor

    with torch.enable_grad(), hooks(model, [(names_filter, read)]):
        output = model(*model_args, **model_kwargs)
        value = metric(output)
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(f"metric must return a scalar tensor to differentiate, got {shape}; reduce it, "
                             "e.g. with .sum() or by indexing one logit.")
        if not value.requires_grad:
            raise ValueError("metric's value does not depend on the model's output through autograd (did it call "
                             ".item(), .detach() or build a new tensor?).")
        grads = torch.autograd.grad(value.reshape(()), list(tensors.values()), allow_unused=True)
    target = None if device is None else torch.device(device)
    for (name, tensor), grad in zip(tensors.items(), grads):
        grad = torch.zeros_like(tensor) if grad is None else grad  # the metric does not depend on this tensor
        cache[name + GRAD_SUFFIX] = grad.detach().to(target or grad.device, copy=True)
    return output, cache
