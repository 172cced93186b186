"""HookPoint: a named place in the model where hooks read, or replace, one intermediate tensor.

Names (relative to the BERT backbone; a task model prefixes them with `bert.`):
    embeddings.hidden                                  (B, T, C)      embeddings output
    encoder.layer.{i}.attention.self.{q,k,v}           (B, nh, T, hs) queries, keys, values per head
    encoder.layer.{i}.attention.self.probs             (B, nh, T, S)  attention probabilities
    encoder.layer.{i}.attention.self.context           (B, nh, T, hs) each head's output, before the projection
    encoder.layer.{i}.crossattention.self.{...}        the same five for cross-attention (decoders)
    encoder.layer.{i}.intermediate.act                 (B, T, I)      the feed-forward layer after its activation
    encoder.layer.{i}.hidden                           (B, T, C)      residual stream after layer i

As in TransformerLens, a HookPoint is an identity module; a hook on it is an ordinary forward hook, so anything
that hooks modules (a trace, a user's `register_forward_hook`) can watch it, and its handle removes exactly it.
Two keywords make watching cheap:
- `add_hook(hook, read_only=True)` promises that the hook only reads the tensor (no replacement, no change in
  place). When every hook on a point reads only, the layer may keep what it computed beside it: the CPU attention
  kernel's output stands and the traced forward equals the untraced one bit for bit.
- `point(x, handed_over=True)` says that the caller drops `x` once the hooks have seen it, so a lone read-only
  hook may keep it without a copy; hooks get the flag as their `handed_over` keyword.
A point that nobody watches costs one module call, and the layer computes nothing extra for it.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn.modules import module as _module
from torch.utils.hooks import RemovableHandle

Hook = Callable[..., "torch.Tensor | None"]  # hook(x, *, point, handed_over) -> a replacement for x, or None


class HookPoint(nn.Module):
    """Identity module that marks a tensor worth observing."""

    def __init__(self) -> None:
        super().__init__()
        self._read_only_ids: set[int] = set()

    def forward(self, x: torch.Tensor, *, handed_over: bool = False) -> torch.Tensor:
        return x

    def add_hook(self, hook: Hook, *, read_only: bool = False) -> RemovableHandle:
        """Call `hook(x, point=self, handed_over=...)` on every forward; unless `read_only`, what it returns (not
        None) replaces x. Remove it with the handle's `remove()`."""

        def forward_hook(point: nn.Module, args: tuple, kwargs: dict, output: torch.Tensor) -> torch.Tensor | None:
            result = hook(output, point=point, handed_over=kwargs.get("handed_over", False))
            return None if read_only else result

        handle = self.register_forward_hook(forward_hook, with_kwargs=True)
        self._read_only_ids &= self._forward_hooks.keys()  # forget read-only hooks removed since
        if read_only:
            self._read_only_ids.add(handle.id)
        return handle

    @property
    def is_watched(self) -> bool:
        """True when any hook is registered on this point."""
        return bool(self._forward_hooks or self._forward_pre_hooks)

    @property
    def is_read_only(self) -> bool:
        """True when every hook on this point reads only (and no module-wide hook could change the tensor)."""
        return (bool(self._forward_hooks) and not self._forward_pre_hooks
                and self._read_only_ids.issuperset(self._forward_hooks)
                and not _module._global_forward_hooks and not _module._global_forward_pre_hooks)


def hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """Every HookPoint of `model` by dotted name, in model order (TransformerLens' `hook_dict`)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    return {name: module for name, module in model.named_modules() if isinstance(module, HookPoint)}
