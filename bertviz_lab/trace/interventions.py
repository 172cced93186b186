"""ablate(): switch attention heads off inside a block, to see whether they matter (TransformerLens-style hooks on
the model's `context` hook points, removed on exit, also after an error)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator

import torch
from torch import nn

from bertviz_lab.model.hook_points import HookPoint, hook_points

ABLATION_MODES = ("zero", "mean")
_SELF_CONTEXT = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.attention\.self\.context$")


def context_points(model: nn.Module) -> list[HookPoint]:
    """The `context` hook point of each self-attention layer, in layer order."""
    found = [(int(m.group(1)), point) for name, point in hook_points(model).items()
             if (m := _SELF_CONTEXT.search(name))]
    return [point for _, point in sorted(found, key=lambda item: item[0])]


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


def _ablation(heads: list[int], mode: str):
    """A hook that replaces the chosen heads' outputs (B, nh, T, hs): zeros, or each one's mean over positions."""
    index = torch.tensor(heads)

    def hook(context: torch.Tensor, **_) -> torch.Tensor:
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
    points = context_points(model)
    if not points:
        raise ValueError(f"{type(model).__name__} has no attention `context` hook points to ablate.")
    num_heads = next(m.num_heads for m in model.modules() if hasattr(m, "num_heads") and hasattr(m, "context"))
    chosen = _heads_by_layer(heads, len(points), num_heads)
    handles = []
    try:
        for layer, layer_heads in chosen.items():
            handles.append(points[layer].add_hook(_ablation(layer_heads, mode)))
        yield
    finally:
        for handle in handles:
            handle.remove()
