"""Queries and keys of one layer, recorded only when the neuron view asks for them.

A panel's forward records attention maps only; recording every layer's q, k and v with it would cost memory on every
text (bert-base at 512 tokens: 12 layers × 3 × 1.5 MB) for a view that may never open. So the neuron view takes
them from the trace when it holds them (`trace(model, qkv=True)`), else runs the model once more on the same inputs,
traced with qkv=True for the chosen layer and example row only, and keeps that layer until the trace changes.
"""

from __future__ import annotations

from typing import Any

import torch

from bertviz_lab.trace.hooks import Trace, trace
from bertviz_lab.widgets.panels.running import evaluating

INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "inputs_embeds")


def recorded_inputs(recorded: Trace) -> dict[str, torch.Tensor]:
    """The model inputs of a trace's first forward pass, to run the same input again."""
    first = recorded.passes[0].inputs if recorded.passes else {}
    return {key: first[key] for key in INPUT_KEYS if key in first}


class LayerQK:
    """q and k of one example, layer by layer: from the trace, or from one traced forward per layer asked for."""

    def __init__(self, recorded: Trace, model: torch.nn.Module | None = None,
                 inputs: dict[str, torch.Tensor] | None = None, row: int = 0) -> None:
        self.trace, self.model, self.row = recorded, model, row
        self.inputs = inputs if inputs is not None else recorded_inputs(recorded)
        self.forwards = 0  # forwards run here (the tests count them)
        self._layers: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    @property
    def available(self) -> bool:
        """True when q and k can be had: recorded in the trace, or a model to run on the trace's inputs."""
        return bool(self.trace.q) or (self.model is not None and bool(self.inputs))

    def why_not(self) -> str:
        """What the neuron view needs when it has no q and k."""
        return ("the neuron view needs each layer's queries and keys: record the trace with trace(model, qkv=True), "
                "or build the panel with model= and tokenizer=.")

    def __call__(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(q (nh, T, hs), k (nh, S, hs)) of the panel's example at `layer`."""
        whole = self.trace.heads is None and self.trace.batch_index is None
        if whole and layer in self.trace.q and layer in self.trace.k:
            return self.trace.q[layer][self.row], self.trace.k[layer][self.row]
        if layer not in self._layers:
            # a trace that holds other layers' (or some heads') q and k but no model to run: nothing to record with
            if self.model is None or not self.inputs:
                raise ValueError(self.why_not())
            self._layers[layer] = self._record(self.model, layer)
        return self._layers[layer]

    def _record(self, model: torch.nn.Module, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        device = next(model.parameters()).device
        inputs: dict[str, Any] = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.inputs.items()}
        with evaluating(model), torch.inference_mode(), trace(model, attentions=False, shapes=False, qkv=True,
                                                              layers=[layer], batch_index=[self.row]) as recorded:
            model(**inputs)
        self.forwards += 1
        return recorded.q[layer][0], recorded.k[layer][0]
