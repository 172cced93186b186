"""The logit lens (nostalgebraist, 2020): read every layer's residual stream through the model's own masked-LM head,
to see at which depth the final prediction forms and what the model "thought" before it.

The head is applied unchanged (transform, activation, LayerNorm, decoder: `cls.predictions` of
BERTForMaskedLM / BERTForPreTraining and of every family's MLM model), so the last layer's row is the model's
own prediction and earlier rows differ only by the layers not yet run. The residual streams come from the
`embeddings.hidden` and `encoder.layer.{l}.hidden` hook points (one forward pass, nothing else watched).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from bertviz_lab.model.heads import BERTLMPredictionHead
from bertviz_lab.model.hook_points import hook_points, run_with_cache
from bertviz_lab.trace.hooks import site
from bertviz_lab.trace.saliency import TOKENIZER_ONLY_KEYS

__all__ = ["LayerTop", "LogitLens", "logit_lens"]


@dataclass(frozen=True)
class LayerTop:
    """One layer's k most likely tokens at a position: layer 0 is the embeddings' output, layer l the output of
    encoder layer l (1-based, as Hugging Face's hidden_states)."""

    layer: int
    ids: list[int]
    probs: list[float]
    tokens: list[str] | None = None  # with a tokenizer


@dataclass(frozen=True)
class LogitLens:
    """Vocabulary logits (num_layers + 1, seq, vocab) of one input row, the embeddings' output first; the last row
    is what the model itself predicts."""

    logits: torch.Tensor
    input_ids: torch.Tensor | None = None  # (seq,), when the batch held input_ids
    tokenizer: Any = None

    @property
    def num_layers(self) -> int:
        return self.logits.shape[0] - 1

    def probs(self) -> torch.Tensor:
        """Softmax over the vocabulary, (num_layers + 1, seq, vocab), in float32."""
        return torch.softmax(self.logits.float(), dim=-1)

    def top(self, position: int, k: int = 5) -> list[LayerTop]:
        """Per layer (embeddings first), the k most likely tokens at `position` and their probabilities."""
        seq, vocab = self.logits.shape[1:]
        if isinstance(position, bool) or not isinstance(position, int) or not -seq <= position < seq:
            raise ValueError(f"position must be an int in 0..{seq - 1} (or -{seq}..-1), got {position!r}.")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= vocab:
            raise ValueError(f"k must be an int in 1..{vocab} (the vocabulary), got {k!r}.")
        probs, ids = torch.softmax(self.logits[:, position].float(), dim=-1).topk(k, dim=-1)
        convert = getattr(self.tokenizer, "convert_ids_to_tokens", None)
        rows = []
        for layer, (layer_ids, layer_probs) in enumerate(zip(ids.tolist(), probs.tolist())):
            tokens = list(convert(layer_ids)) if convert is not None else None
            rows.append(LayerTop(layer, layer_ids, layer_probs, tokens))
        return rows


def mlm_head(model: nn.Module, needed_by: str = "the logit lens") -> BERTLMPredictionHead:
    """The model's masked-LM prediction head (`cls.predictions`); a model without one is an error that says how
    to load one (`needed_by` names what needs it, e.g. "activation patching at [MASK]")."""
    head = getattr(getattr(model, "cls", None), "predictions", None)
    if not isinstance(head, BERTLMPredictionHead):
        raise ValueError(
            f"{needed_by} needs a masked-LM head, and {type(model).__name__} has none: load the checkpoint "
            f"with its head, e.g. BERTForMaskedLM.from_pretrained(path) or bertviz_lab.load(name) for a "
            f"checkpoint that holds one (bert-base-uncased gives BERTForPreTraining).")
    return head


def hidden_names(model: nn.Module) -> list[str]:
    """The residual-stream hook points in Hugging Face's hidden_states order: embeddings, then each layer."""
    found = sorted((where[1], name) for name in hook_points(model)
                   if (where := site(name)) is not None and where[0] == "hidden_states")
    return [name for _, name in found]


def first_row(batch: Mapping[str, Any]) -> dict[str, Any]:
    """The batch's first row as model inputs (tensors cut to (1, ...)); tokenizer-only keys dropped."""
    if not isinstance(batch, Mapping):
        raise TypeError(f"batch must be the tokenizer's dict of tensors (input_ids, attention_mask, ...), "
                        f"got {type(batch).__name__}.")
    return {key: value[:1] if isinstance(value, torch.Tensor) and value.dim() else value
            for key, value in batch.items() if key not in TOKENIZER_ONLY_KEYS}


def logit_lens(model: nn.Module, batch: Mapping[str, Any], *, tokenizer: Any = None) -> LogitLens:
    """Every layer's residual stream of the batch's first row, put through the model's own masked-LM head.

    Early layers of BERT often already rank the right token highly at a masked position; where the prediction
    appears (and what it was before) is what this shows. `tokenizer` turns ids into strings in `LogitLens.top`.
    """
    head = mlm_head(model)
    names = hidden_names(model)
    inputs = first_row(batch)
    with torch.no_grad():
        _, cache = run_with_cache(model, names_filter=names, **inputs)
        logits = torch.stack([head(cache[name])[0] for name in names])
    ids = inputs.get("input_ids")
    return LogitLens(logits, ids[0] if isinstance(ids, torch.Tensor) else None, tokenizer)
