"""What a trace records: module calls, forward passes (an activation cache each), per-module parameter counts."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from bertviz_lab.model.hook_points import ActivationCache
from bertviz_lab.trace.shapes import TensorSpec

MODEL_INPUT = -1  # producer index of a tensor that entered through the traced model's own arguments


@dataclass
class Call:
    """One module call: where it sits, what went in and came out, and how many parameters it holds."""

    index: int  # position in Trace.calls (execution order: the order calls start)
    pass_index: int  # which forward pass of the traced model it belongs to
    path: str  # dotted module path from the traced model ("" for the model itself)
    class_name: str
    depth: int  # call nesting: 0 for the model, 1 for what it calls, ...
    parent: int | None  # index of the enclosing call
    inputs: tuple[TensorSpec, ...]  # positional tensors as arg0, arg1, ...; keyword tensors by keyword
    outputs: tuple[TensorSpec, ...] | None = None  # None until the call returns (or when it raised)
    num_params: int = 0  # parameters of the module and its children, tied weights counted once
    trainable_params: int = 0
    shares_params: bool = False  # some parameter is also registered in a module outside this one (tied weights)
    input_sources: tuple[int | None, ...] = ()  # per input tensor: producing call index, MODEL_INPUT, or None
    output_sources: tuple[int | None, ...] = ()  # per output tensor: the call that produced it inside, if any

    @property
    def name(self) -> str:
        """Last component of the path (the class name for the model itself)."""
        return self.path.rsplit(".", 1)[-1] if self.path else self.class_name

    @property
    def input_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the input tensors, for code that does not need their names."""
        return [spec.shape for spec in self.inputs]

    @property
    def output_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the output tensors (empty while the call runs or after it raised)."""
        return [spec.shape for spec in self.outputs or ()]


@dataclass
class ForwardPass:
    """What one forward pass of the traced model left behind: an activation cache keyed by hook name, and views of
    it by what each point holds and its layer (the model's layer indices)."""

    index: int
    cache: ActivationCache = field(default_factory=ActivationCache)  # hook name -> detached CPU tensor
    sites: dict[str, tuple[str, int]] = field(default_factory=dict, repr=False)  # hook name -> (kind, layer)
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # input_ids, attention_mask, token_type_ids, ...
    batch_size: int | None = None  # of the model's input, before batch_index selection

    def by_layer(self, kind: str) -> dict[int, torch.Tensor]:
        """What points of one kind held, by layer index."""
        return {layer: self.cache[name] for name, (k, layer) in self.sites.items() if k == kind and name in self.cache}

    @property
    def attentions(self) -> dict[int, torch.Tensor]:
        return self.by_layer("attentions")  # layer -> (B, nh, T, S)

    @property
    def cross_attentions(self) -> dict[int, torch.Tensor]:
        return self.by_layer("cross_attentions")  # layer -> (B, nh, T, S)

    @property
    def hidden_states(self) -> dict[int, torch.Tensor]:
        return self.by_layer("hidden_states")  # 0: embeddings, i + 1: after layer i

    @property
    def q(self) -> dict[int, torch.Tensor]:
        return self.by_layer("q")  # layer -> (B, nh, T, hs) queries

    @property
    def k(self) -> dict[int, torch.Tensor]:
        return self.by_layer("k")  # layer -> (B, nh, S, hs) keys

    @property
    def v(self) -> dict[int, torch.Tensor]:
        return self.by_layer("v")  # layer -> (B, nh, S, hs) values

    @property
    def context(self) -> dict[int, torch.Tensor]:
        return self.by_layer("context")  # layer -> (B, nh, T, hs) heads' outputs

    @property
    def mlp(self) -> dict[int, torch.Tensor]:
        return self.by_layer("mlp")  # layer -> (B, T, I) feed-forward activations


def parameter_table(model: nn.Module) -> dict[int, tuple[int, int, bool]]:
    """Per module (by id): parameters of its subtree (tied ones once), trainable ones, and whether one of them is
    also registered outside the subtree (a tied weight); one bottom-up walk instead of parameters() per module."""
    owners: dict[int, int] = {}  # id(parameter) -> how many modules register it
    params: dict[int, nn.Parameter] = {}
    for module in model.modules():
        for p in module._parameters.values():
            if p is not None:
                owners[id(p)] = owners.get(id(p), 0) + 1
                params[id(p)] = p
    table: dict[int, tuple[int, int, bool]] = {}

    def walk(module: nn.Module) -> dict[int, int]:
        """id(parameter) -> registrations inside this subtree."""
        inside: dict[int, int] = {}
        for p in module._parameters.values():
            if p is not None:
                inside[id(p)] = inside.get(id(p), 0) + 1
        for child in module.children():
            for key, n in walk(child).items():
                inside[key] = inside.get(key, 0) + n
        table[id(module)] = (sum(params[k].numel() for k in inside),
                             sum(params[k].numel() for k in inside if params[k].requires_grad),
                             any(owners[k] > n for k, n in inside.items()))
        return inside

    walk(model)
    return table
