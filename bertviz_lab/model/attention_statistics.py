"""attention_statistics(): ask the BERT forwards of this thread for each chosen layer's per-head statistics of its
attention, beside their outputs, the way a corpus analysis needs them.

For each text and head the seven sums over the text's queries (weighted by `valid`) of: the entropy of the query's
attention (nats) and its weight on [CLS], on [SEP], on itself, on the previous key, on the next key and on
punctuation (`kinds` says which keys are [CLS], [SEP], punctuation), as `kernels.probability_statistics` defines
them. A self-attention layer answers through its attention backend (`with_statistics`: the AVX2 kernel's one pass
never forms the probabilities), or, where it runs the plain path (a hook on its probabilities, a decoder's causal
mask), from its probabilities. Reductions run in float32 whatever the model's dtype, so a bf16 forward loses only
what its queries and keys lost.

The request lives in a context variable: a forward of the same model on another thread meanwhile (a panel's, a
training step's) knows nothing of it, and nothing of the model is changed.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import torch

from bertviz_lab import kernels

__all__ = ["StatisticsCollected", "StatisticsRequest", "attention_statistics", "current_request"]


class StatisticsCollected(Exception):
    """Raised by the layer `stop_after` names once its statistics are in: the rest of the forward is not needed."""


@dataclass
class StatisticsRequest:
    """What the forwards inside `attention_statistics` are asked for, and what they answered (`found`)."""

    layers: frozenset[int]
    valid: torch.Tensor  # (B, T) float: 1 at real tokens
    kinds: torch.Tensor  # (B, T, 3) float: which keys are [CLS], [SEP], punctuation
    heads: list[int] | None = None  # the heads kept (None: all)
    stop_after: int | None = None
    found: dict[int, torch.Tensor] = field(default_factory=dict)

    def wants(self, layer: int) -> bool:
        return layer in self.layers

    def needs_output(self, layer: int) -> bool:
        """Whether the layer's attention output is needed (not after the last layer asked for)."""
        return layer != self.stop_after

    def from_probabilities(self, probs: torch.Tensor) -> torch.Tensor:
        """The (B, H, 7) statistics of probabilities a layer formed (the plain path), reduced in float32."""
        return kernels.probability_statistics(probs.float(), self.valid, self.kinds[:, None])

    def deliver(self, layer: int, statistics: torch.Tensor) -> None:
        """Keep a layer's (B, H, 7) sums (the chosen heads); stop the forward after `stop_after`."""
        self.found[layer] = statistics[:, self.heads] if self.heads is not None else statistics
        if layer == self.stop_after:
            raise StatisticsCollected


_REQUEST: contextvars.ContextVar[StatisticsRequest | None] = contextvars.ContextVar("attention_statistics",
                                                                                    default=None)


def current_request() -> StatisticsRequest | None:
    """The request of the running block on this thread, if any (what a self-attention layer asks). A compiled
    graph has none: requests are answered eagerly, and torch.compile cannot read a ContextVar without breaking its
    graph at every layer."""
    if torch.compiler.is_compiling():
        return None
    return _REQUEST.get()


@contextlib.contextmanager
def attention_statistics(layers: Iterable[int], valid: torch.Tensor, kinds: torch.Tensor,
                         heads: list[int] | None = None,
                         stop_after: int | None = None) -> Iterator[dict[int, torch.Tensor]]:
    """Inside the block every BERT forward on this thread also computes, for each self-attention layer in
    `layers`, the (B, H, 7) statistics of its attention for the texts of its batch (`valid` (B, T), `kinds`
    (B, T, 3), as above), of the `heads` chosen; they land in the dict yielded, by layer. With `stop_after`, that
    layer raises StatisticsCollected once its statistics are in (catch it around the forward)."""
    request = StatisticsRequest(frozenset(layers), valid, kinds, heads, stop_after)
    token = _REQUEST.set(request)
    try:
        yield request.found
    finally:
        _REQUEST.reset(token)
