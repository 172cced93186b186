"""ablate(): switch attention heads off inside a block, to see whether they matter (hooks on the model's `context`
hook points through `hook_points.hooks`, removed on exit, also after an error)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch
from torch import nn

from bertviz_lab.model.hook_points import Hook, HookPoint, hook_points, hooks
from bertviz_lab.trace.hooks import site

ABLATION_MODES = ("zero", "mean")


def context_names(model: nn.Module) -> list[str]:
    """The name of each self-attention layer's `context` hook point, in layer order."""
    found = [(found[1], name) for name in hook_points(model) if (found := site(name)) and found[0] == "context"]
    return [name for _, name in sorted(found)]


def _heads_by_layer(heads: Iterable[tuple[int, int]], num_layers: int, num_heads: int) -> dict[int, list[int]]:
    """{layer: sorted heads}, negative indices counted from the end; a bad pair names itself and the valid range."""
    if isinstance(heads, (str, bytes)) or not isinstance(heads, Iterable):
        raise TypeError(f"heads must be a set of (layer, head) pairs, got {heads!r}.")
    by_layer: dict[int, set[int]] = {}
    for pair in heads:
        if (not isinstance(pair, tuple) or len(pair) != 2
                or any(isinstance(i, bool) or not isinstance(i, int) for i in pair)):
            raise TypeError(f"heads must hold (layer, head) pairs of ints, got {pair!r}.")
        layer, head = pair
        if not -num_layers <= layer < num_layers:
            raise ValueError(f"heads holds {pair}: the model has {num_layers} layers (0..{num_layers - 1}).")
        if not -num_heads <= head < num_heads:
            raise ValueError(f"heads holds {pair}: each layer has {num_heads} heads (0..{num_heads - 1}).")
        by_layer.setdefault(layer % num_layers, set()).add(head % num_heads)
    return {layer: sorted(chosen) for layer, chosen in sorted(by_layer.items())}


def _ablation(heads: list[int], mode: str) -> Hook:
    """A hook that replaces the chosen heads' outputs (B, nh, T, hs): zeros, or each one's mean over positions."""
    index = torch.tensor(heads)

    def hook(context: torch.Tensor, point: HookPoint) -> torch.Tensor:
        out = context.clone()
        chosen = out[:, index.to(out.device)]
        out[:, index.to(out.device)] = 0 if mode == "zero" else chosen.mean(dim=2, keepdim=True).expand_as(chosen)
        return out

    return hook


@contextlib.contextmanager
def ablate(model: nn.Module, heads: Iterable[tuple[int, int]], mode: str = "zero") -> Iterator[None]:
    """Inside the block, the chosen attention heads' outputs (before the output projection) are zeroed
    (mode="zero") or replaced by their mean over the sequence positions of the same input (mode="mean"), in every
    forward of `model`; nested blocks compose, and on exit exactly this block's hooks are removed."""
    if mode not in ABLATION_MODES:
        raise ValueError(f"mode={mode!r}: use 'zero' or 'mean'.")
    names = context_names(model)
    if not names:
        raise ValueError(f"{type(model).__name__} has no attention `context` hook points to ablate.")
    # any module with both attributes (ours, a relative's): read by name, as nn.Module does not type them
    num_heads: int = next(getattr(m, "num_heads") for m in model.modules()
                          if hasattr(m, "num_heads") and hasattr(m, "context"))
    chosen = _heads_by_layer(heads, len(names), num_heads)
    with hooks(model, [(names[layer], _ablation(layer_heads, mode)) for layer, layer_heads in chosen.items()]):
        yield
