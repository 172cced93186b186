"""What a task model predicts for the workbench's text, named by its config's id2label: a tag under each token
(e.g. NER), the labels of a text classifier with their probabilities, IsNext / NotNext for a sentence pair."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import torch

from bertviz_lab.model.bert import BERTPreTrainedModel
from bertviz_lab.model.encoding import encode_text
from bertviz_lab.model.heads import (
    BERTForNextSentencePrediction,
    BERTForPreTraining,
    BERTForSequenceClassification,
    BERTForTokenClassification,
)
from bertviz_lab.widgets.figures.palette import HEAD_COLORS
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.panel import chip
from bertviz_lab.widgets.panels.running import evaluating
from bertviz_lab.widgets.panels.text_run import TextRun

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


def tag_kind(label: str, names: list[str]) -> str:
    """The chip kind of a tag (views/panels.css): untouched grey for the outside tag, else one colour per label."""
    return "untouched" if label == OUTSIDE else f"tag-{names.index(label) % len(HEAD_COLORS)}"


def _tags_html(model: BERTPreTrainedModel, tokenizer: Any, encoded: Any, logits: torch.Tensor) -> str:
    """A tag under each token of a token classifier, the most probable label first."""
    probs = torch.softmax(logits.float(), dim=-1).cpu()  # (T, num_labels)
    names = model.config.label_names()
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist())
    special = encoded["special_tokens_mask"][0].tolist()
    cells = []
    for token, is_special, row in zip(tokens, special, probs):
        if is_special:
            continue
        label = names[int(row.argmax())]
        cells.append("<span class='bvl-token-cell'>" + chip(token, "untouched", f"{label} {float(row.max()):.2f}")
                     + chip(label, tag_kind(label, names), small=True) + "</span>")
    return "<div class='bvl-predictions'><b>tags</b> " + "".join(cells) + "</div>"


def _labels_html(model: BERTPreTrainedModel, logits: torch.Tensor) -> str:
    """A text classifier's score, or its labels ranked by probability."""
    if model.config.num_labels == 1:
        return f"<div class='bvl-predictions'><b>score</b> {float(logits[0]):.4f}</div>"
    return f"<div class='bvl-predictions'><b>label</b> {_ranked(model.config.label_names(), logits)}</div>"


def _predicts(model: torch.nn.Module, text_b: str | None) -> bool:
    """True when the model has a head whose prediction this line shows for the text (pair)."""
    pair_head = isinstance(model, (BERTForNextSentencePrediction, BERTForPreTraining)) and bool(text_b)
    return pair_head or isinstance(model, (BERTForTokenClassification, BERTForSequenceClassification))


def output_html(model: torch.nn.Module, tokenizer: Any, encoded: Any, output: Any, text_b: str | None = None) -> str:
    """The prediction line from a forward's output on `encoded`, so the line needs no forward of its own."""
    if not _predicts(model, text_b):
        return ""
    if isinstance(model, BERTForTokenClassification):
        return _tags_html(model, tokenizer, encoded, output[0])
    if isinstance(model, BERTForSequenceClassification):
        return _labels_html(model, output[0])
    logits = output[1] if isinstance(output, tuple) else output
    return f"<div class='bvl-predictions'><b>next sentence</b> {_ranked(list(NSP_LABELS), logits[0])}</div>"


def prediction_html(model: torch.nn.Module, tokenizer: Any, text: str, text_b: str | None = None) -> str:
    """The model's prediction for a text (pair) as HTML; empty for models with no head that names labels."""
    if not _predicts(model, text_b):
        return ""
    encoded, inputs = encode_text(model, tokenizer, text, text_b)
    return output_html(model, tokenizer, encoded, _scores(model, inputs), text_b)


def run_html(run: TextRun) -> str:
    """The prediction line of a forward already run (a Workbench's, shared with its other panels)."""
    return output_html(run.model, run.tokenizer, run.encoded.encoding, run.output, run.text_b)


class Predictions(widgets.HTML):
    """One line under the text box: what the model predicts, in its own label names (empty for a bare backbone)."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, text: str, text_b: str | None = None, *,
                 run: TextRun | None = None) -> None:
        super().__init__()
        self.model, self.tokenizer = model, tokenizer
        if run is not None:
            self.show_run(run)
        else:
            self.show(text, text_b)

    def show(self, text: str, text_b: str | None = None) -> None:
        """Predict for a new text (pair) and redraw."""
        self.text, self.text_b = text, text_b
        self.value = prediction_html(self.model, self.tokenizer, text, text_b)

    def show_run(self, run: TextRun) -> None:
        """Show what a forward already run on a text (pair) predicts, without running the model again."""
        self.text, self.text_b = run.text, run.text_b
        self.value = run_html(run)

    def rerun(self, *_: Any) -> None:
        """Predict again (e.g. after the model moved to another device)."""
        self.show(self.text, self.text_b)
