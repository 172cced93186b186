"""What a task model predicts for the workbench's text, named by its config's id2label: a tag under each token
(e.g. NER), the labels of a text classifier with their probabilities, IsNext / NotNext for a sentence pair."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import torch

from bertviz_lab.model.encoding import encode_text
from bertviz_lab.model.heads import (
    BERTForNextSentencePrediction,
    BERTForPreTraining,
    BERTForSequenceClassification,
    BERTForTokenClassification,
)
from bertviz_lab.widgets.common import COLORS, HEAD_COLORS, chip, escape, evaluating

NSP_LABELS = ("IsNext", "NotNext")  # label 0: B follows A; 1: B is random
OUTSIDE = "O"  # the usual tag of tokens outside every entity


def _scores(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> Any:
    with evaluating(model), torch.inference_mode():
        return model(**inputs)


def _ranked(names: list[str], logits: torch.Tensor, top: int = 3) -> str:
    """The most probable labels first, with their probabilities ("positive 0.93 · negative 0.07")."""
    probs = torch.softmax(logits.float(), dim=-1).cpu()
    order = probs.argsort(descending=True)[:top].tolist()
    return " · ".join(f"{escape(names[i])} {float(probs[i]):.2f}" for i in order)


def _tag_color(label: str, names: list[str]) -> str:
    return COLORS["untouched"] if label == OUTSIDE else HEAD_COLORS[names.index(label) % len(HEAD_COLORS)]


def prediction_html(model: torch.nn.Module, tokenizer: Any, text: str, text_b: str | None = None) -> str:
    """The model's prediction for a text (pair) as HTML; empty for models with no head that names labels."""
    if isinstance(model, BERTForTokenClassification):
        encoded, inputs = encode_text(model, tokenizer, text, text_b)
        logits = _scores(model, inputs)[0]  # (T, num_labels)
        probs = torch.softmax(logits.float(), dim=-1).cpu()
        names = model.config.label_names()
        tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist())
        special = encoded["special_tokens_mask"][0].tolist()
        cells = []
        for token, is_special, row in zip(tokens, special, probs):
            if is_special:
                continue
            label = names[int(row.argmax())]
            foreground = "#111" if label == OUTSIDE else "#fff"
            cells.append("<span style='display:inline-flex;flex-direction:column;align-items:center'>"
                         + chip(token, COLORS["untouched"], f"{label} {float(row.max()):.2f}")
                         + chip(label, _tag_color(label, names), foreground=foreground,
                                extra_style="font-size:10px") + "</span>")
        return "<div class='bvl-predictions'><b>tags</b> " + "".join(cells) + "</div>"
    if isinstance(model, BERTForSequenceClassification):
        logits = _scores(model, encode_text(model, tokenizer, text, text_b)[1])[0]
        if model.config.num_labels == 1:
            return f"<div class='bvl-predictions'><b>score</b> {float(logits[0]):.4f}</div>"
        return f"<div class='bvl-predictions'><b>label</b> {_ranked(model.config.label_names(), logits)}</div>"
    if isinstance(model, (BERTForNextSentencePrediction, BERTForPreTraining)) and text_b:
        out = _scores(model, encode_text(model, tokenizer, text, text_b)[1])
        logits = out[1] if isinstance(out, tuple) else out
        return f"<div class='bvl-predictions'><b>next sentence</b> {_ranked(list(NSP_LABELS), logits[0])}</div>"
    return ""


class Predictions(widgets.HTML):
    """One line under the text box: what the model predicts, in its own label names (empty for a bare backbone)."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, text: str, text_b: str | None = None) -> None:
        super().__init__()
        self.model, self.tokenizer = model, tokenizer
        self.show(text, text_b)

    def show(self, text: str, text_b: str | None = None) -> None:
        """Predict for a new text (pair) and redraw."""
        self.text, self.text_b = text, text_b
        self.value = prediction_html(self.model, self.tokenizer, text, text_b)

    def rerun(self, *_: Any) -> None:
        """Predict again (e.g. after the model moved to another device)."""
        self.show(self.text, self.text_b)
