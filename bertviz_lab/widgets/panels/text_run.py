"""One forward pass of a model on a text (pair), recorded once: what every panel of a Workbench reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from bertviz_lab.model.encoding import EncodedText, Truncation, encode_text
from bertviz_lab.trace.hooks import Trace, trace
from bertviz_lab.widgets.panels.running import evaluating, threads_for


@dataclass(frozen=True)
class TextRun:
    """A text (pair), its batch, the Trace of the model's forward on it and that forward's output."""

    model: torch.nn.Module
    tokenizer: Any
    text: str
    text_b: str | None
    encoded: EncodedText
    trace: Trace  # attentions, module calls with shapes, tokens
    output: Any  # what model(**inputs) returned

    @property
    def truncation(self) -> Truncation:
        """What a text longer than the model lost."""
        return self.encoded.truncation

    def reads(self, model: torch.nn.Module | None, tokenizer: Any) -> bool:
        """True when this run is what `model` makes of the text read by `tokenizer` (a panel may reuse it)."""
        return model is self.model and tokenizer is self.tokenizer


def run_text(model: torch.nn.Module, tokenizer: Any, text: str, text_b: str | None = None, *,
             shapes: bool = True) -> TextRun:
    """Encode once and run the model once in eval mode (a short text on one CPU thread: running.threads_for),
    recording attentions (and module shapes) and the output."""
    encoded = encode_text(model, tokenizer, text, text_b)
    ids = encoded.inputs["input_ids"]
    with evaluating(model), threads_for(model, ids.shape[-1], ids.device), torch.inference_mode(), \
            trace(model, attentions=True, shapes=shapes, tokens=encoded.encoding, tokenizer=tokenizer) as recorded:
        output = model(**encoded.inputs)
    return TextRun(model, tokenizer, text, text_b or None, encoded, recorded, output)
