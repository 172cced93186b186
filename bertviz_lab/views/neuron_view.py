"""bertviz's one-line neuron view, `show(model, model_type, tokenizer, sentence_a, ...)`: the attention panel's
neuron view (one query's q against every key's k inside one head) for a BERT-family model.

bertviz needs its own copies of the model classes for this view, because it must see the queries and keys; here the
model's hook points record them, so the model `bertviz_lab.load` gives works as it is. A transformers model and
tokenizer (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA) are read into this package's classes once, through their
saved files, and give the same numbers.
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch

from bertviz_lab.model.auto import load
from bertviz_lab.model.bert import BERTPreTrainedModel
from bertviz_lab.model.family_tokenizer import load_tokenizer
from bertviz_lab.model.tokenizer import BERTTokenizerFast
from bertviz_lab.util.files import shown
from bertviz_lab.views.inputs import check_html_action
from bertviz_lab.views.page import html_object, offline_page
from bertviz_lab.widgets import registry
from bertviz_lab.widgets.panels.attention import AttentionPanel

__all__ = ["show"]


def show(model: Any, model_type: str, tokenizer: Any, sentence_a: str, sentence_b: str | None = None,
         display_mode: str = "dark", layer: int | None = None, head: int | None = None,
         html_action: str = "view") -> Any:
    """The neuron view of `sentence_a` (and `sentence_b`, a pair) at `layer` and `head` (default 0 and 0), as
    bertviz's neuron_view.show is called.

    model_type names the model's family ("bert", "roberta", "xlm-roberta", "distilbert", "electra") and must be the
    model's own. html_action="view" gives the AttentionPanel on its neuron view (displayed when it is the cell's last
    value; its other views are one click away); "return" an offline HTML page of the figure in display_mode ("dark",
    bertviz's default, or "light"), as an IPython HTML object."""
    action = check_html_action(html_action)
    if display_mode not in ("dark", "light"):
        raise ValueError(f"display_mode must be 'dark' or 'light', got {shown(display_mode)}.")
    if not isinstance(sentence_a, str) or (sentence_b is not None and not isinstance(sentence_b, str)):
        raise TypeError(f"sentence_a and sentence_b must be strings, got {shown(sentence_a)} and "
                        f"{shown(sentence_b)}.")
    model, tokenizer = _ours(model, tokenizer)
    family = model.config.model_type
    if model_type != family:
        raise ValueError(f"model_type is {shown(model_type)} but the model is a {family} model; pass "
                         f"model_type={family!r} (bertviz_lab draws the BERT family: bert, roberta, xlm-roberta, "
                         "distilbert, electra).")
    panel = AttentionPanel(model=model, tokenizer=tokenizer, text=sentence_a, text_b=sentence_b,
                           layer=0 if layer is None else layer, head=0 if head is None else head,
                           view=registry.NEURON_VIEW)
    if action == "view":
        return panel
    try:
        return html_object(offline_page([panel.to_svg()], "bertviz-lab neuron view", display_mode))
    finally:
        panel.close()


def _ours(model: Any, tokenizer: Any) -> tuple[BERTPreTrainedModel, BERTTokenizerFast]:
    """The model and tokenizer as this package's classes: as they are, or transformers' read from the files their
    save_pretrained writes."""
    # (a family's tokenizer is a BERTTokenizerFast too)
    own_model, own_tokenizer = isinstance(model, BERTPreTrainedModel), isinstance(tokenizer, BERTTokenizerFast)
    if not own_model and not callable(getattr(model, "save_pretrained", None)):
        raise TypeError(f"model must be a bertviz_lab model (bertviz_lab.load(name)) or a transformers BERT-family "
                        f"model, got {type(model).__name__}.")
    if not own_tokenizer and not callable(getattr(tokenizer, "save_pretrained", None)):
        raise TypeError(f"tokenizer must be the model's tokenizer (bertviz_lab's or transformers'), got "
                        f"{type(tokenizer).__name__}.")
    if own_model and own_tokenizer:
        return model, tokenizer
    with tempfile.TemporaryDirectory(prefix="bertviz-lab-neuron-") as folder:
        tokenizer.save_pretrained(folder)
        if own_model:
            return model, load_tokenizer(folder)
        model.save_pretrained(folder, safe_serialization=True)
        device = next(iter(model.parameters()), torch.empty(0)).device
        ours, read_tokenizer = load(folder, device=device)
    ours.train(model.training)
    return ours, tokenizer if own_tokenizer else read_tokenizer
