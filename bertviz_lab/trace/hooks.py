"""trace(): record what a BERT's forward passes leave at its hook points (through the model's own hooks API) and
which modules they call; a Trace reads it back by layer.

Which points are recorded is a names filter built from the options (attentions, hidden_states, qkv, context, mlp,
layers). A watched `probs` point makes that layer alone write its attention out and form its probabilities
(bertviz_lab.model.layers); unwatched layers keep the fast attention. The traced output equals the untraced one to
float32 rounding (1e-5); the probabilities are softmax's own.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from bertviz_lab.model.hook_points import (
    ActivationCache,
    HookPoint,
    NamesFilter,
    hook_points,
    hooks,
    names_matching,
)
from bertviz_lab.trace.calls import CallRecorder
from bertviz_lab.trace.records import Call, ForwardPass
from bertviz_lab.trace.storage import Storage, index_list
from bertviz_lab.trace.tokens import INPUT_ALIASES, INPUT_NAMES, token_rows

if TYPE_CHECKING:
    from bertviz_lab.trace.summary import Summary

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB: all attention maps of bert-base at batch 8, seq 256, with room to spare

# a hook point's name -> what it holds: (kind, layer), kind naming the Trace attribute it shows under
_SITE = re.compile(r"(?:^|\.)(?:(embeddings)\.hidden|encoder\.layer\.(\d+)\.(hidden|intermediate\.act|"
                   r"attention\.self\.(?:q|k|v|probs|context)|crossattention\.self\.probs))$")
_KINDS = {"hidden": "hidden_states", "intermediate.act": "mlp", "crossattention.self.probs": "cross_attentions",
          "attention.self.probs": "attentions", **{f"attention.self.{k}": k for k in ("q", "k", "v", "context")}}
_WHAT = {"attentions": "attention", "cross_attentions": "cross-attention", "q": "queries", "k": "keys",
         "v": "values", "context": "heads' outputs", "mlp": "feed-forward activations"}
_PER_HEAD = {"attentions", "cross_attentions", "q", "k", "v", "context"}


def site(name: str) -> tuple[str, int] | None:
    """(kind, layer) of a BERT hook point's name: ("attentions", 3) for `...encoder.layer.3.attention.self.probs`;
    hidden states by Hugging Face's numbering (0 the embeddings, i + 1 after layer i); None for any other name."""
    match = _SITE.search(name)
    if match is None:
        return None
    if match.group(1):
        return "hidden_states", 0
    layer, kind = int(match.group(2)), _KINDS[match.group(3)]
    return kind, layer + 1 if kind == "hidden_states" else layer


# the trace ---------------------------------------------------------------------------------------------
class Trace:
    """What forward passes of a model did while traced: per pass an activation cache keyed by hook name (read
    here by layer as attentions, hidden states, q/k/v, ...), and every module call with its shapes.

    Everything held is a detached CPU copy, or attention probabilities this trace alone watches, kept as the layer
    made them (it never changes them and returns them to nobody). Top-level views
    (`cache`, `attentions`, `hidden_states`, `input_ids`, ...) show the first forward pass; every pass is in
    `passes`, every module call of every pass in `calls`.
    """

    def __init__(self, model: nn.Module, *, attentions: bool = True, hidden_states: bool = False,
                 shapes: bool = True, qkv: bool = False, context: bool = False, mlp: bool = False,
                 layers: int | Sequence[int] | None = None,
                 heads: int | Sequence[int] | None = None, batch_index: int | Sequence[int] | None = None,
                 names_filter: NamesFilter = (), max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"trace() needs a torch.nn.Module, got {type(model).__name__}.")
        points = hook_points(model)
        self._sites = {name: found for name in points if (found := site(name)) is not None}
        kinds = {kind for kind, _ in self._sites.values()}
        self.model_class = type(model).__name__
        self.num_layers = 1 + max((layer for kind, layer in self._sites.values() if kind != "hidden_states"),
                                  default=-1)
        probs = next((name for name, (kind, _) in self._sites.items() if kind == "attentions"), None)
        self.num_heads = getattr(model.get_submodule(probs.rsplit(".", 1)[0]), "num_heads", None) if probs else None
        if layers is not None and not self.num_layers:
            raise ValueError(f"layers={layers!r} was given but {self.model_class} has no BERT layers with hook points.")
        if heads is not None and not self.num_heads:
            raise ValueError(f"heads={heads!r} was given but {self.model_class} has no attention hook points.")
        self.record_shapes = shapes
        wanted = {"attentions": attentions, "cross_attentions": attentions, "hidden_states": hidden_states,
                  "q": qkv, "k": qkv, "v": qkv, "context": context, "mlp": mlp}
        for kind in ("q", "k", "v", "context", "mlp"):
            if wanted[kind] and kind not in kinds:
                option = "qkv" if kind in ("q", "k", "v") else kind
                raise ValueError(f"{option}=True was given but {self.model_class} has no {kind} hook points.")
        self.layers = index_list(layers, "layers", self.num_layers, self.model_class)
        self.heads = index_list(heads, "heads", self.num_heads, "each attention layer")
        self.batch_index = index_list(batch_index, "batch_index")
        self._storage = Storage(self.heads, self.batch_index, max_bytes)
        chosen = set(range(self.num_layers)) if self.layers is None else set(self.layers)
        # the names filter: hidden state 0 (the embeddings) always, i + 1 with layer i
        by_options = {name for name, (kind, layer) in self._sites.items() if wanted[kind]
                      and (layer - 1 if kind == "hidden_states" else layer) in chosen | {-1}}
        by_filter = set(names_matching(points, names_filter))
        self.names = [name for name in points if name in by_options | by_filter]  # in model order
        self.max_bytes = max_bytes
        self.passes: list[ForwardPass] = []
        self._points = {name: points[name] for name in self.names}
        self._point_names = {id(point): name for name, point in self._points.items()}
        self._tokens: list[list[str]] | None = None
        self._encoding_inputs: dict[str, torch.Tensor] = {}
        self._signature = self._forward_signature(model)
        passes = self.passes  # not `self`: a trace in a reference cycle keeps its tensors until a garbage collection
        self._calls = CallRecorder(model, lambda: passes[-1].index if passes else 0)

    @property
    def calls(self) -> list[Call]:
        """Every module call of every pass, in the order they started (trace with shapes=True)."""
        return self._calls.calls

    # recording -----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _recording(self, model: nn.Module) -> Iterator[None]:
        """This trace's hooks inside the block: a reader on each chosen point, the model's own start and end, and
        the module calls; exactly these are removed on exit."""
        handles = [model.register_forward_pre_hook(self._on_model_start, with_kwargs=True),
                   model.register_forward_hook(self._on_model_end, with_kwargs=True)]
        if self.record_shapes:
            handles += self._calls.attach(model)
        try:
            with hooks(model, [(self.names, self._record)], points=self._points):
                yield
        finally:
            for handle in handles:
                handle.remove()
            self._calls.clear()
            self._points, self._point_names = {}, {}  # the model's points: a finished trace keeps nothing of it

    @staticmethod
    def _forward_signature(model: nn.Module) -> inspect.Signature | None:
        try:
            return inspect.signature(model.forward)
        except (TypeError, ValueError):
            return None

    def _on_model_start(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        current = ForwardPass(len(self.passes), sites=self._sites)
        self.passes.append(current)
        named: dict[str, Any] = dict(kwargs)
        if self._signature is not None:
            with contextlib.suppress(TypeError):
                named = dict(self._signature.bind_partial(*args, **kwargs).arguments)
        for key in ("input_ids", "inputs_embeds", "attention_mask"):
            if isinstance(named.get(key), torch.Tensor) and named[key].dim() >= 2:
                current.batch_size = named[key].shape[0]
                break
        for given, value in named.items():
            key = INPUT_ALIASES.get(given, given)
            if key in INPUT_NAMES and isinstance(value, torch.Tensor):
                per_row = value.dim() >= 2 and value.shape[0] == current.batch_size  # (1, T) broadcasts: kept whole
                current.inputs[key] = self._storage.keep(value, f"input {key}", batch_dim=per_row)
        if current.index == 0 and self._tokens is not None:
            self._check_tokens_fit(self._tokens)
        if self.record_shapes:
            self._calls.model_start(model, args, kwargs, named)  # inputs named by the forward signature

    def _on_model_end(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        if self.record_shapes:
            self._calls.model_end(model, args, kwargs, output)

    def _record(self, tensor: torch.Tensor, point: HookPoint) -> None:
        """Keep what a chosen point holds in the running pass (a new pass when a submodule was called directly or
        this point already spoke in this one)."""
        name = self._point_names.get(id(point))
        if name is None:
            return
        if not self.passes or name in self.passes[-1].cache:
            self.passes.append(ForwardPass(len(self.passes), sites=self._sites))
        kind, layer = self._sites.get(name, (name, -1))
        what = (("embeddings output" if layer == 0 else f"hidden state after layer {layer - 1}")
                if kind == "hidden_states" else f"{_WHAT[kind]} of layer {layer}" if kind in _WHAT else name)
        # attention maps this trace alone watches are kept as they are (a 100 MB copy a layer at 8 x 512 saved): the
        # layer makes them afresh, never changes them and returns them to nobody; anything else is copied
        alone = kind in ("attentions", "cross_attentions") and len(point._forward_hooks) == 1 and tensor._base is None
        self.passes[-1].cache[name] = self._storage.keep(tensor, what, batch_dim=True, heads=kind in _PER_HEAD,
                                                         copy=not alone)

    @property
    def nbytes(self) -> int:
        """Bytes of tensors this trace holds (what max_bytes limits)."""
        return self._storage.nbytes

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
    def cache(self) -> ActivationCache:
        """The first pass's activations keyed by hook name (`encoder.layer.0.attention.self.probs`, ...)."""
        return self._first().cache

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
          mlp: bool = False, names_filter: NamesFilter = (), tokens: Any = None, tokenizer: Any = None,
          max_bytes: int | None = DEFAULT_MAX_BYTES) -> Iterator[Trace]:
    """Record the forward passes run inside the block; the hooks are removed on exit, also after an error.

    attentions / hidden_states: record attention probabilities / residual streams (of `layers`, default all).
    shapes: record every module call with its input and output shapes and parameter counts.
    qkv / context / mlp: record each layer's queries, keys and values / heads' outputs before the output projection /
    feed-forward activations, as `t.q[layer]`, `t.k`, `t.v`, `t.context`, `t.mlp` (nothing is computed or kept
    for what is not asked).
    names_filter: also these hook points (a name, names or a predicate, as `model.run_with_cache` takes), kept in
    `t.cache` by name (batch_index applies to them; heads to the per-head points of BERT's attention only).
    heads, batch_index: keep only these heads / batch rows. tokens (+ tokenizer): see Trace.attach_tokens.
    max_bytes: the most the trace may hold; exceeding it raises TraceSizeError (a ValueError) naming this option.
    """
    recorder = Trace(model, attentions=attentions, hidden_states=hidden_states, shapes=shapes, qkv=qkv,
                     context=context, mlp=mlp, layers=layers, heads=heads, batch_index=batch_index,
                     names_filter=names_filter, max_bytes=max_bytes)
    if tokens is not None:
        recorder.attach_tokens(tokens, tokenizer)
    with recorder._recording(model):
        yield recorder
