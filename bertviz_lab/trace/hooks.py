"""trace(): forward hooks on a BERT's HookPoints and modules that record it into a Trace, then remove themselves.

The hook points are the model's (bertviz_lab.model.hook_points lists them). A hook on a `probs` point makes that
layer alone compute its probabilities (bertviz_lab.kernels.attention); unwatched layers keep the fast attention.
A trace's hooks are read-only (`HookPoint.add_hook(..., read_only=True)`), so on the CPU kernel the probabilities
come from the same pass, handed over, and the layer keeps the kernel's output: the traced forward equals the
untraced one bit for bit.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from bertviz_lab.model.hook_points import HookPoint, hook_points
from bertviz_lab.trace.records import MODEL_INPUT, Call, ForwardPass, parameter_table
from bertviz_lab.trace.shapes import TensorSpec, call_arguments, iter_tensors
from bertviz_lab.trace.tokens import INPUT_ALIASES, INPUT_NAMES, token_rows

if TYPE_CHECKING:
    from bertviz_lab.trace.summary import Summary

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB: all attention maps of bert-base at batch 8, seq 256, with room to spare

_SELF_PROBS = re.compile(r"(?:^|\.)attention\.self\.probs$")
_CROSS_PROBS = re.compile(r"(?:^|\.)crossattention\.self\.probs$")
_EMBEDDINGS_HIDDEN = re.compile(r"(?:^|\.)embeddings\.hidden$")
_LAYER_HIDDEN = re.compile(r"(?:^|\.)encoder\.layer\.\d+\.hidden$")
# the points inside each layer recorded on request: Trace attribute -> point name pattern
_INSIDE = {kind: re.compile(rf"(?:^|\.)attention\.self\.{kind}$") for kind in ("q", "k", "v", "context")}
_INSIDE["mlp"] = re.compile(r"(?:^|\.)encoder\.layer\.\d+\.intermediate\.act$")
_INSIDE_WHAT = {"q": "queries", "k": "keys", "v": "values", "context": "heads' outputs",
                "mlp": "feed-forward activations"}


class TraceSizeError(ValueError):
    """A trace would hold more bytes than its max_bytes allows."""


@dataclass
class _Sites:
    """Where the hook points of a BERT sit inside a model."""

    self_probs: list[tuple[str, HookPoint]]
    cross_probs: list[tuple[str, HookPoint]]
    embeddings: list[tuple[str, HookPoint]]
    layer_hidden: list[tuple[str, HookPoint]]
    num_heads: int | None
    inside: dict[str, list[HookPoint]]  # "q", "k", "v", "context", "mlp" -> one point per layer

    @classmethod
    def find(cls, model: nn.Module) -> "_Sites":
        points = list(hook_points(model).items())
        self_probs = [(n, m) for n, m in points if _SELF_PROBS.search(n)]
        num_heads = None
        if self_probs:
            num_heads = getattr(model.get_submodule(self_probs[0][0].rsplit(".", 1)[0]), "num_heads", None)
        inside = {kind: [m for n, m in points if pattern.search(n) and ".crossattention." not in n]
                  for kind, pattern in _INSIDE.items()}
        return cls(self_probs, [(n, m) for n, m in points if _CROSS_PROBS.search(n)],
                   [(n, m) for n, m in points if _EMBEDDINGS_HIDDEN.search(n)],
                   [(n, m) for n, m in points if _LAYER_HIDDEN.search(n)], num_heads, inside)

    @property
    def num_layers(self) -> int:
        return max(len(self.self_probs), len(self.layer_hidden))


def _index_list(value: Any, name: str, size: int | None = None, owner: str = "") -> list[int] | None:
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


# the trace ---------------------------------------------------------------------------------------------
class Trace:
    """What forward passes of a model did while traced: attentions, hidden states, module calls with shapes.

    Everything held is a detached CPU copy, or a tensor the model handed over and no longer holds (the CPU
    kernel's attention probabilities, when this trace is the only hook on their point). Top-level views
    (`attentions`, `hidden_states`, `input_ids`, ...) show the first forward pass; every pass is in `passes`, every
    module call of every pass in `calls`.
    """

    def __init__(self, model: nn.Module, *, attentions: bool = True, hidden_states: bool = False,
                 shapes: bool = True, qkv: bool = False, context: bool = False, mlp: bool = False,
                 layers: int | Sequence[int] | None = None,
                 heads: int | Sequence[int] | None = None, batch_index: int | Sequence[int] | None = None,
                 max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"trace() needs a torch.nn.Module, got {type(model).__name__}.")
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0):
            raise ValueError(f"max_bytes must be a positive int (bytes) or None for no limit, got {max_bytes!r}.")
        self._sites: _Sites | None = _Sites.find(model)
        self.model_class = type(model).__name__
        self.num_layers = self._sites.num_layers
        self.num_heads = self._sites.num_heads
        if layers is not None and not self.num_layers:
            raise ValueError(f"layers={layers!r} was given but {self.model_class} has no BERT layers with hook points.")
        if heads is not None and not self.num_heads:
            raise ValueError(f"heads={heads!r} was given but {self.model_class} has no attention hook points.")
        self.record_attentions, self.record_hidden_states, self.record_shapes = attentions, hidden_states, shapes
        self.record_inside = [kind for kind, wanted in (("q", qkv), ("k", qkv), ("v", qkv), ("context", context),
                                                        ("mlp", mlp)) if wanted]
        for kind in self.record_inside:
            if not self._sites.inside[kind]:
                option = "qkv" if kind in ("q", "k", "v") else kind
                raise ValueError(f"{option}=True was given but {self.model_class} has no {kind} hook points.")
        self.layers = _index_list(layers, "layers", self.num_layers, self.model_class)
        self.heads = _index_list(heads, "heads", self.num_heads, "each attention layer")
        self.batch_index = _index_list(batch_index, "batch_index")
        self.max_bytes = max_bytes
        self.passes: list[ForwardPass] = []
        self.calls: list[Call] = []
        self.nbytes = 0
        self._model_ref = weakref.ref(model)
        self._head_sel, self._batch_sel = _selector(self.heads), _selector(self.batch_index)
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self._tokens: list[list[str]] | None = None
        self._encoding_inputs: dict[str, torch.Tensor] = {}
        self._signature = self._forward_signature(model)
        self._open: dict[int, list[int]] = {}  # id(module) -> indices of its calls still running
        self._stack: list[int] = []  # indices of the calls now running, outermost first
        self._producers: dict[int, tuple[weakref.ref, int]] = {}  # id(tensor) -> (ref, producing call)
        self._params: dict[int, tuple[int, int, bool]] | None = None

    # hooks ---------------------------------------------------------------------------------------------
    def _attach(self, model: nn.Module) -> None:
        """Register this trace's hooks (the handles are kept so that exactly these are removed)."""
        add = self._handles.append
        add(model.register_forward_pre_hook(self._on_model_start, with_kwargs=True))
        add(model.register_forward_hook(self._on_model_end, with_kwargs=True))
        wanted = set(range(self.num_layers)) if self.layers is None else set(self.layers)
        if self.record_attentions:
            for kind, sites in (("attentions", self._sites.self_probs), ("cross_attentions", self._sites.cross_probs)):
                for layer, (_, point) in enumerate(sites):
                    if layer in wanted:
                        add(point.add_hook(functools.partial(self._on_probs, kind, layer), read_only=True))
        if self.record_hidden_states:
            for _, point in self._sites.embeddings[:1]:
                add(point.add_hook(functools.partial(self._on_hidden, 0), read_only=True))
            for layer, (_, point) in enumerate(self._sites.layer_hidden):
                if layer in wanted:
                    add(point.add_hook(functools.partial(self._on_hidden, layer + 1), read_only=True))
        for kind in self.record_inside:
            for layer, point in enumerate(self._sites.inside[kind]):
                if layer in wanted:
                    add(point.add_hook(functools.partial(self._on_inside, kind, layer), read_only=True))
        if self.record_shapes:
            for path, module in model.named_modules():
                if path and not isinstance(module, HookPoint):  # a hook on a HookPoint would switch attention paths
                    add(module.register_forward_pre_hook(functools.partial(self._on_call_start, path),
                                                         with_kwargs=True))
                    add(module.register_forward_hook(self._on_call_end, with_kwargs=True))

    def _detach(self) -> None:
        """Remove exactly the hooks this trace added, and drop bookkeeping that could pin tensors."""
        while self._handles:
            self._handles.pop().remove()
        self._sites = None  # references into the model: a finished trace must not keep modules alive
        self._producers.clear()
        self._open.clear()
        self._stack.clear()

    @staticmethod
    def _forward_signature(model: nn.Module) -> inspect.Signature | None:
        try:
            return inspect.signature(model.forward)
        except (TypeError, ValueError):
            return None

    def _on_model_start(self, model: nn.Module, args: tuple, kwargs: dict) -> None:
        current = ForwardPass(len(self.passes))
        self.passes.append(current)
        self._producers.clear()
        self._stack.clear()
        named = dict(kwargs)
        if self._signature is not None:
            with contextlib.suppress(TypeError):
                named = dict(self._signature.bind_partial(*args, **kwargs).arguments)
        for key in ("input_ids", "inputs_embeds", "attention_mask"):
            if isinstance(named.get(key), torch.Tensor) and named[key].dim() >= 2:
                current.batch_size = named[key].shape[0]
                break
        for key, value in named.items():
            key = INPUT_ALIASES.get(key, key)
            if key in INPUT_NAMES and isinstance(value, torch.Tensor):
                per_row = value.dim() >= 2 and value.shape[0] == current.batch_size  # (1, T) broadcasts: kept whole
                current.inputs[key] = self._keep(value, f"input {key}", batch_dim=per_row)
        if current.index == 0 and self._tokens is not None:
            self._check_tokens_fit(self._tokens)
        if self.record_shapes:
            for _, tensor in call_arguments(args, kwargs):
                self._producers[id(tensor)] = (weakref.ref(tensor), MODEL_INPUT)
            self._on_call_start("", model, (), named)  # inputs named by the forward signature

    def _on_model_end(self, model: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if self.record_shapes:
            self._on_call_end(model, args, kwargs, output)
        self._producers.clear()

    def _current_pass(self, kind: str, key: int) -> ForwardPass:
        """The running pass; a new one when a submodule was called directly or this slot is already filled."""
        if not self.passes or key in getattr(self.passes[-1], kind):
            self.passes.append(ForwardPass(len(self.passes)))
        return self.passes[-1]

    def _on_probs(self, kind: str, layer: int, probs: torch.Tensor, *, point: HookPoint, handed_over: bool) -> None:
        current = self._current_pass(kind, layer)
        # handed over and no other hook to share it with: kept as it is (a 100 MB copy a layer at 8 x 512 saved)
        mine = handed_over and len(point._forward_hooks) == 1
        getattr(current, kind)[layer] = self._keep(probs, f"{kind[:-1].replace('_', '-')} of layer {layer}",
                                                   batch_dim=True, heads=True, copy=not mine)

    def _on_inside(self, kind: str, layer: int, x: torch.Tensor, *, point: HookPoint, handed_over: bool) -> None:
        current = self._current_pass(kind, layer)
        getattr(current, kind)[layer] = self._keep(x, f"{_INSIDE_WHAT[kind]} of layer {layer}", batch_dim=True,
                                                   heads=kind != "mlp")

    def _on_hidden(self, index: int, hidden: torch.Tensor, *, point: HookPoint, handed_over: bool) -> None:
        current = self._current_pass("hidden_states", index)
        what = "embeddings output" if index == 0 else f"hidden state after layer {index - 1}"
        current.hidden_states[index] = self._keep(hidden, what, batch_dim=True)

    def _on_call_start(self, path: str, module: nn.Module, args: tuple, kwargs: dict) -> None:
        if not self.passes:
            self.passes.append(ForwardPass(0))
        tensors = list(call_arguments(args, kwargs))
        num, trainable, shared = self._param_counts(module)
        index = len(self.calls)
        self.calls.append(Call(
            index=index, pass_index=self.passes[-1].index, path=path, class_name=type(module).__name__,
            depth=len(self._stack), parent=self._stack[-1] if self._stack else None,
            inputs=tuple(TensorSpec.of(n, t) for n, t in tensors),
            num_params=num, trainable_params=trainable, shares_params=shared,
            input_sources=tuple(self._producer_of(t) for _, t in tensors)))
        self._open.setdefault(id(module), []).append(index)
        self._stack.append(index)

    def _on_call_end(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        running = self._open.get(id(module))
        if not running:
            return
        call = self.calls[running.pop()]
        if call.index in self._stack:  # calls that raised inside leave the stack here
            del self._stack[self._stack.index(call.index):]
        tensors = list(iter_tensors(output))
        call.outputs = tuple(TensorSpec.of(n, t) for n, t in tensors)
        call.output_sources = tuple(self._producer_of(t) for _, t in tensors)
        for _, tensor in tensors:
            self._set_producer(tensor, call)

    def _producer_of(self, tensor: torch.Tensor) -> int | None:
        entry = self._producers.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None

    def _set_producer(self, tensor: torch.Tensor, call: Call) -> None:
        """The innermost module that returned this tensor object produced it; an enclosing one only passed it on."""
        previous = self._producer_of(tensor)
        if previous is not None and previous != MODEL_INPUT:
            inner = self.calls[previous].path
            if not call.path or inner.startswith(call.path + "."):
                return
        self._producers[id(tensor)] = (weakref.ref(tensor), call.index)

    def _param_counts(self, module: nn.Module) -> tuple[int, int, bool]:
        """(parameters, trainable parameters, shares a parameter with a module outside), from one table per trace."""
        if self._params is None:
            model = self._model_ref()
            self._params = parameter_table(model) if model is not None else {}
        return self._params.get(id(module), (0, 0, False))

    def _keep(self, tensor: torch.Tensor, what: str, batch_dim: bool, heads: bool = False,
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

    # tokens --------------------------------------------------------------------------------------------
    def attach_tokens(self, encoding_or_tokens: Any, tokenizer: Any = None) -> "Trace":
        """Label positions with token strings: a list of strings (one row), a list of rows, or an encoding +
        tokenizer."""
        tokens, inputs = token_rows(encoding_or_tokens, tokenizer)
        if self.passes:
            self._check_tokens_fit(tokens)
        self._tokens, self._encoding_inputs = tokens, inputs
        return self

    def _check_tokens_fit(self, tokens: list[list[str]]) -> None:
        reference = self.input_ids if self.input_ids is not None else self.attention_mask
        if reference is None or reference.dim() != 2:
            return
        length = reference.shape[1]
        bad = [len(row) for row in tokens if len(row) != length]
        if bad:
            raise ValueError(f"the tokens have {bad[0]} positions but the traced input has {length}; attach the "
                             f"tokens of the input that was run (with its padding).")

    def _rows(self, n_rows: int) -> list[int]:
        """Which of n_rows given rows line up with the recorded batch rows."""
        if self.batch_index is not None and n_rows > self.batch_index[-1] and n_rows != len(self.batch_index):
            return self.batch_index
        return list(range(n_rows))

    @property
    def tokens(self) -> list[list[str]] | None:
        """Token strings per recorded batch row (None when none were passed or attached)."""
        if self._tokens is None:
            return None
        return [list(self._tokens[r]) for r in self._rows(len(self._tokens))]

    def _input(self, name: str) -> torch.Tensor | None:
        for forward in self.passes[:1]:
            if name in forward.inputs:
                return forward.inputs[name]
        value = self._encoding_inputs.get(name)
        if value is None:
            return None
        return value[self._rows(value.shape[0])]

    @property
    def input_ids(self) -> torch.Tensor | None:
        """(B, T) token ids of the first forward pass (or of the attached encoding)."""
        return self._input("input_ids")

    @property
    def attention_mask(self) -> torch.Tensor | None:
        """The attention mask of the first forward pass as given (1 = attend); None when none was passed."""
        return self._input("attention_mask")

    @property
    def token_type_ids(self) -> torch.Tensor | None:
        """(B, T) sentence A/B ids of the first forward pass (or of the attached encoding)."""
        return self._input("token_type_ids")

    # views -----------------------------------------------------------------------------------------------
    def _first(self) -> ForwardPass:
        return self.passes[0] if self.passes else ForwardPass(0)

    @property
    def attentions(self) -> list[torch.Tensor]:
        """Self-attention probabilities of the first pass, one (B, nh, T, S) tensor per recorded layer."""
        first = self._first().attentions
        return [first[k] for k in sorted(first)]

    @property
    def attention_layers(self) -> list[int]:
        """Layer index of each entry of `attentions`."""
        return sorted(self._first().attentions)

    @property
    def cross_attentions(self) -> list[torch.Tensor]:
        """Cross-attention probabilities of the first pass (decoders with cross-attention), one per recorded layer."""
        first = self._first().cross_attentions
        return [first[k] for k in sorted(first)]

    @property
    def hidden_states(self) -> list[torch.Tensor]:
        """Embeddings output, then the residual stream after each recorded layer, (B, T, C) each."""
        first = self._first().hidden_states
        return [first[k] for k in sorted(first)]

    @property
    def q(self) -> dict[int, torch.Tensor]:
        """Queries of the first pass by layer, (B, nh, T, hs) each (trace with qkv=True)."""
        return dict(sorted(self._first().q.items()))

    @property
    def k(self) -> dict[int, torch.Tensor]:
        """Keys of the first pass by layer, (B, nh, S, hs) each (trace with qkv=True)."""
        return dict(sorted(self._first().k.items()))

    @property
    def v(self) -> dict[int, torch.Tensor]:
        """Values of the first pass by layer, (B, nh, S, hs) each (trace with qkv=True)."""
        return dict(sorted(self._first().v.items()))

    @property
    def context(self) -> dict[int, torch.Tensor]:
        """Each head's output (probabilities @ values) by layer, (B, nh, T, hs), before the output projection
        (trace with context=True)."""
        return dict(sorted(self._first().context.items()))

    @property
    def mlp(self) -> dict[int, torch.Tensor]:
        """Feed-forward activations by layer, (B, T, intermediate) after the activation (trace with mlp=True)."""
        return dict(sorted(self._first().mlp.items()))

    def attention(self, layer: int, cross: bool = False) -> torch.Tensor:
        """The (B, nh, T, S) attention probabilities of one layer (negative counts from the end)."""
        recorded = self._first().cross_attentions if cross else self._first().attentions
        key = layer % self.num_layers if self.num_layers and -self.num_layers <= layer < 0 else layer
        if key not in recorded:
            kind = "cross-attention" if cross else "attention"
            raise ValueError(f"no {kind} recorded for layer {layer}; recorded layers: {sorted(recorded)}.")
        return recorded[key]

    def hidden_state(self, index: int) -> torch.Tensor:
        """Hidden state by Hugging Face numbering: 0 the embeddings, i the output of layer i - 1, -1 the last."""
        recorded = self._first().hidden_states
        key = index + self.num_layers + 1 if index < 0 else index
        if key not in recorded:
            raise ValueError(f"no hidden state {index} recorded (recorded: {sorted(recorded)}, 0 = embeddings); "
                             f"trace with hidden_states=True and the layers you need.")
        return recorded[key]

    # reports ---------------------------------------------------------------------------------------------
    def summary(self, depth: int | None = None) -> "Summary":
        """Module, class, output shape, parameters and trainability of every call of the first pass."""
        from bertviz_lab.trace.summary import summarize

        return summarize(self, depth=depth)

    def __repr__(self) -> str:
        shape = tuple(self.attentions[0].shape) if self.attentions else None
        return (f"Trace({self.model_class}: {len(self.passes)} forward pass(es), {len(self.attentions)} attention "
                f"layers {shape or ''}, {len(self.hidden_states)} hidden states, {len(self.calls)} calls, "
                f"{self.nbytes:,} bytes)")


@contextlib.contextmanager
def trace(model: nn.Module, attentions: bool = True, hidden_states: bool = False, shapes: bool = True,
          layers: int | Sequence[int] | None = None, heads: int | Sequence[int] | None = None,
          batch_index: int | Sequence[int] | None = None, *, qkv: bool = False, context: bool = False,
          mlp: bool = False, tokens: Any = None, tokenizer: Any = None,
          max_bytes: int | None = DEFAULT_MAX_BYTES) -> Iterator[Trace]:
    """Record the forward passes run inside the block; the hooks are removed on exit, also after an error.

    attentions / hidden_states: record attention probabilities / residual streams (of `layers`, default all).
    shapes: record every module call with its input and output shapes and parameter counts.
    qkv / context / mlp: record each layer's queries, keys and values / heads' outputs before the output projection /
    feed-forward activations, as `t.q[layer]`, `t.k`, `t.v`, `t.context`, `t.mlp` (nothing is computed or kept
    for what is not asked).
    heads, batch_index: keep only these heads / batch rows. tokens (+ tokenizer): see Trace.attach_tokens.
    max_bytes: the most the trace may hold; exceeding it raises TraceSizeError (a ValueError) naming this option.
    """
    recorder = Trace(model, attentions=attentions, hidden_states=hidden_states, shapes=shapes, qkv=qkv,
                     context=context, mlp=mlp, layers=layers, heads=heads, batch_index=batch_index,
                     max_bytes=max_bytes)
    if tokens is not None:
        recorder.attach_tokens(tokens, tokenizer)
    try:
        recorder._attach(model)
        yield recorder
    finally:
        recorder._detach()
