"""Activation patching: which layer, position or head carries the information that tells a clean input from a
corrupted one, found by copying the clean run's activation into the corrupted run one cell at a time and seeing
how much of the clean metric comes back.

Cells of one layer go through the model together: the corrupted batch is repeated along the batch dimension, copy i
with cell i patched, so a layer costs one forward (or one per chunk of `chunk_size` cells) instead of one per cell.
Hook points by `point` are listed in POINTS (one place, so a new point is one line).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from bertviz_lab.model.hook_points import HookPoint, hook_points, hooks, run_with_cache
from bertviz_lab.trace.saliency import TOKENIZER_ONLY_KEYS

__all__ = ["POINTS", "PatchResult", "patch"]

# point -> the per-layer hook point's name (relative to the backbone; a task model's start with `bert.`)
POINTS: dict[str, str] = {
    "hidden": "encoder.layer.{layer}.hidden",  # (B, T, C) residual stream after the layer
    "attn_out": "encoder.layer.{layer}.attention.output.attn_out",  # (B, T, C) attention's output
    "mlp_out": "encoder.layer.{layer}.output.mlp_out",  # (B, T, C) feed-forward's output
    "head_out": "encoder.layer.{layer}.attention.output.head_out",  # (B, nh, T, C) each head's part of attn_out
}
PER_HEAD = frozenset({"head_out"})  # points patched head by head (at every position, or at `positions`)

Metric = Callable[[Any], Any]


@dataclass(frozen=True)
class PatchResult:
    """The metric of the corrupted run with one cell patched from the clean run, per (layer, position) or per
    (layer, head); cells not patched (positions left out) are NaN."""

    effect: torch.Tensor  # (num_layers, seq) or (num_layers, num_heads), float32 on the CPU
    clean: float  # the metric of the clean run
    corrupted: float  # the metric of the corrupted run, unpatched
    point: str
    forwards: int  # patched forward passes (the clean and the corrupted reference runs not counted)

    @property
    def normalized(self) -> torch.Tensor:
        """(effect - corrupted) / (clean - corrupted): 1 where patching the cell restores the clean metric, 0 where
        it changes nothing (inf or NaN where clean == corrupted: then there is nothing to restore)."""
        return (self.effect - self.corrupted) / (self.clean - self.corrupted)


def layer_point_names(model: nn.Module, point: str) -> list[str]:
    """The model's hook point names of `point`, layer by layer; an unknown point or one the model lacks is an
    error naming what there is."""
    if point not in POINTS:
        raise ValueError(f"point={point!r} is not a patchable point; known points: {', '.join(POINTS)}.")
    names = list(hook_points(model))
    found: list[str] = []
    while True:
        suffix = POINTS[point].format(layer=len(found))
        matches = [name for name in names if name == suffix or name.endswith(f".{suffix}")]
        if not matches:
            break
        found.append(matches[0])
    if not found:
        raise ValueError(f"{type(model).__name__} has no {POINTS[point].format(layer='{l}')!r} hook points "
                         f"for point={point!r}; see model.hook_points() for the ones it has.")
    return found


def model_inputs(name: str, batch: Mapping[str, Any]) -> dict[str, Any]:
    """The batch's model inputs (tokenizer-only keys dropped); not a dict of a (batch, seq) input is an error."""
    if not isinstance(batch, Mapping):
        raise TypeError(f"{name} must be the tokenizer's dict of tensors (input_ids, attention_mask, ...), "
                        f"got {type(batch).__name__}.")
    inputs = {key: value for key, value in batch.items() if key not in TOKENIZER_ONLY_KEYS}
    main = inputs.get("input_ids", inputs.get("inputs_embeds"))
    if not isinstance(main, torch.Tensor) or main.dim() < 2:
        raise ValueError(f"{name} must hold input_ids as a (batch, seq) tensor; tokenize with return_tensors='pt'.")
    return inputs


def batch_shape(inputs: Mapping[str, Any]) -> tuple[int, int]:
    main: torch.Tensor = inputs.get("input_ids", inputs.get("inputs_embeds"))
    return main.shape[0], main.shape[1]


def scalar(value: Any) -> float:
    """The metric's value as a float; anything but one number is an error naming what came back."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach().float().reshape(()))
    got = f"a tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
    raise ValueError(f"metric(output) must return a scalar tensor, got {got}; reduce it to one number "
                     f"(e.g. logits[0, position, token_id] or .mean()).")


def repeated(inputs: Mapping[str, Any], copies: int) -> dict[str, Any]:
    """Every batched tensor tiled `copies` times along the batch dimension (copy i is rows i*B .. (i+1)*B - 1)."""
    return {key: value.repeat(copies, *([1] * (value.dim() - 1)))
            if isinstance(value, torch.Tensor) and value.dim() else value for key, value in inputs.items()}


def copy_of(output: Any, index: int, rows: int, copies: int) -> Any:
    """Copy `index`'s part of a repeated run's output (tensors, tuples, named tuples, dicts of them)."""
    if isinstance(output, torch.Tensor):
        return output[index * rows:(index + 1) * rows] if output.dim() and output.shape[0] == rows * copies \
            else output
    if isinstance(output, tuple) and hasattr(output, "_fields"):
        return type(output)(*(copy_of(part, index, rows, copies) for part in output))
    if isinstance(output, (tuple, list)):
        return type(output)(copy_of(part, index, rows, copies) for part in output)
    if isinstance(output, Mapping):
        return {key: copy_of(part, index, rows, copies) for key, part in output.items()}
    return output


def chosen_positions(positions: Iterable[int] | None, seq: int) -> list[int]:
    """0-based positions in the order given, each once; None is every position."""
    if positions is None:
        return list(range(seq))
    if isinstance(positions, int) and not isinstance(positions, bool):
        positions = [positions]
    chosen: list[int] = []
    for position in positions:
        if isinstance(position, bool) or not isinstance(position, int) or not -seq <= position < seq:
            raise ValueError(f"positions must be ints in 0..{seq - 1} (or -{seq}..-1), got {position!r}.")
        if position % seq not in chosen:
            chosen.append(position % seq)
    if not chosen:
        raise ValueError("positions is empty: pass None for every position.")
    return chosen


def cell_mask(per_head: bool, cells: list[int], positions: list[int], shape: torch.Size,
              device: torch.device) -> torch.Tensor:
    """(copies, 1, *shape[1:-1], 1) booleans, True where copy i takes the clean value: position cells[i], or head
    cells[i] at `positions`. `shape` is one copy's activation shape, (B, T, C) or (B, nh, T, C)."""
    mask = torch.zeros(len(cells), 1, *shape[1:-1], 1, dtype=torch.bool, device=device)
    for copy, cell in enumerate(cells):
        if per_head:
            mask[copy, 0, cell, positions] = True
        else:
            mask[copy, 0, cell] = True
    return mask


def patching_hook(clean: torch.Tensor, mask: torch.Tensor) -> Callable[[torch.Tensor, HookPoint], torch.Tensor]:
    """A hook that gives each copy of the repeated corrupted activation its cell's clean value."""
    copies = mask.shape[0]

    def hook(activation: torch.Tensor, point: HookPoint) -> torch.Tensor:
        corrupted = activation.view(copies, *clean.shape)
        return torch.where(mask, clean.unsqueeze(0), corrupted).reshape(activation.shape)

    return hook


def patch(model: nn.Module, clean: Mapping[str, Any], corrupted: Mapping[str, Any], metric: Metric,
          point: str = "hidden", positions: Iterable[int] | None = None, *,
          chunk_size: int | None = None) -> PatchResult:
    """Patch each layer's `point` from the clean run into the corrupted run, one cell at a time, and measure.

    Where the normalized effect is near 1, that cell alone carries what the metric needs from the clean input;
    near 0, it carries none of it. `point` is a key of POINTS: "hidden", "attn_out", "mlp_out" patch one position
    per cell (effect (num_layers, seq)); "head_out" patches one head per cell, at every position or at `positions`
    (effect (num_layers, num_heads)). `metric(output)` turns the model's output for the (unrepeated) batch into one
    number, e.g. `lambda logits: logits[0, 5, answer_id] - logits[0, 5, wrong_id]`. `chunk_size` caps the cells
    run in one forward (memory); by default all cells of a layer run at once.
    """
    names = layer_point_names(model, point)
    clean_inputs, corrupted_inputs = model_inputs("clean", clean), model_inputs("corrupted", corrupted)
    (clean_rows, clean_len), (rows, seq) = batch_shape(clean_inputs), batch_shape(corrupted_inputs)
    if clean_len != seq:
        raise ValueError(f"clean and corrupted must have the same length: clean has {clean_len} tokens, corrupted "
                         f"{seq}; pad both to one length (padding='max_length', max_length=...).")
    if clean_rows != rows:
        raise ValueError(f"clean and corrupted must have the same batch size: clean has {clean_rows} rows, "
                         f"corrupted {rows}.")
    if model.training:
        raise ValueError("the model is in training mode, so dropout would change every forward pass; call "
                         "model.eval() first.")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive int (cells per forward pass), got {chunk_size!r}.")
    wanted = chosen_positions(positions, seq)
    per_head = point in PER_HEAD
    with torch.no_grad():
        clean_output, cache = run_with_cache(model, names_filter=names, **clean_inputs)
        clean_metric = scalar(metric(clean_output))
        corrupted_metric = scalar(metric(model(**corrupted_inputs)))
        columns = cache[names[0]].shape[1] if per_head else seq
        cells = list(range(columns)) if per_head else wanted
        effect = torch.full((len(names), columns), float("nan"))
        step = chunk_size or len(cells)
        forwards = 0
        for layer, name in enumerate(names):
            clean_value = cache[name]
            for start in range(0, len(cells), step):
                chunk = cells[start:start + step]
                mask = cell_mask(per_head, chunk, wanted, clean_value.shape, clean_value.device)
                with hooks(model, [(name, patching_hook(clean_value, mask))]):
                    output = model(**repeated(corrupted_inputs, len(chunk)))
                forwards += 1
                for copy, cell in enumerate(chunk):
                    effect[layer, cell] = scalar(metric(copy_of(output, copy, rows, len(chunk))))
    return PatchResult(effect, clean_metric, corrupted_metric, point, forwards)
