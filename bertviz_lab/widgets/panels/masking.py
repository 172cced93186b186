"""MaskingPreview: watch BERT's 80/10/10 masking happen to a text, and what an MLM model predicts there."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any, Callable

import ipywidgets as widgets
import torch

from bertviz_lab.model.encoding import EncodedText, Truncation, encode_text
from bertviz_lab.model.pretraining import MaskingPlan, apply_masking, sample_masking
from bertviz_lab.trace.targets import predicts_masked_tokens, predicts_next_sentence, split_heads
from bertviz_lab.widgets.figures.masking import Chip, MaskingState, masking_figure
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.panel import Panel, error_html
from bertviz_lab.widgets.panels.running import evaluating
from bertviz_lab.widgets.panels.text_run import TextRun
from bertviz_lab.widgets.views.figure_view import FigureView

LABELLED = {"description_width": "initial"}


def format_probability(p: float) -> str:
    """Two significant digits, so small probabilities stay readable: 0.0031, 0.50, 1.0, 3.1e-05."""
    return f"{p:#.2g}"


def head_outputs(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> tuple[Any, Any]:
    """(MLM scores (B, T, V) or None, NSP scores (B, 2) or None) from one forward pass in eval mode."""
    if not (predicts_masked_tokens(model) or predicts_next_sentence(model)):
        return None, None
    with evaluating(model), torch.inference_mode():
        return split_heads(model, model(**inputs))


class _TrainerFollower:
    """A Trainer callback: the preview takes the trained weights and redraws, at most once per `interval` seconds."""

    def __init__(self, preview: "MaskingPreview", trainer: Any, interval: float) -> None:
        self.preview, self.trainer, self.interval = preview, trainer, interval
        self.last = 0.0

    def __call__(self, record: Any) -> None:
        if time.monotonic() - self.last >= self.interval:
            self.refresh()

    def on_train_end(self, trainer: Any) -> None:
        self.refresh()

    def refresh(self) -> None:
        self.last = time.monotonic()
        if self.preview.follower is self:
            self.preview.refresh_from_trainer()


class MaskingPreview(Panel):
    """Sliders for p and the mask/random/keep split, a seed and a resample button; tokens coloured by fate."""

    def __init__(self, tokenizer: Any, text: str, model: torch.nn.Module | None = None, text_b: str | None = None,
                 mlm_probability: float = 0.15, mask_replace_prob: float = 0.8, random_replace_prob: float = 0.1,
                 seed: int = 0, top_k: int = 5, run: TextRun | None = None) -> None:
        self.tokenizer, self.model, self.top_k = tokenizer, model, top_k
        self.trainer: Any = None  # the Trainer whose model predicts here (see follow())
        self.follower: _TrainerFollower | None = None
        self.next_sentence: float | None = None
        self._model_source: Callable[[], Any] | None = None
        self._lock = threading.RLock()  # the training thread and the notebook may both redraw
        self.probability = widgets.FloatSlider(value=mlm_probability, min=0.0, max=1.0, step=0.01,
                                               description="select p", readout_format=".2f", style=LABELLED)
        self.mask_share = widgets.FloatSlider(value=mask_replace_prob, min=0.0, max=1.0, step=0.05,
                                              description="→ [MASK]", readout_format=".2f", style=LABELLED)
        self.random_share = widgets.FloatSlider(value=random_replace_prob, min=0.0, max=1.0, step=0.05,
                                                description="→ random", readout_format=".2f", style=LABELLED)
        self.seed = widgets.IntText(value=seed, description="seed", style=LABELLED,
                                    layout=widgets.Layout(width="120px"))
        self.resample = widgets.Button(description="resample", icon="refresh", layout=widgets.Layout(width="auto"))
        self.export = ExportBar(self, "masking")
        self.view = FigureView()
        self.offer_message = widgets.HTML()
        self.take_button = widgets.Button(description="use the model from the Training tab", icon="exchange",
                                          button_style="info", layout=widgets.Layout(width="auto"))
        self.take_button.add_class("bvl-take-training-model")
        self.take_button.on_click(lambda _: self.take_offered_model())
        self.offer = widgets.HBox([self.take_button, self.offer_message],
                                  layout=widgets.Layout(display="none", align_items="center"))
        self.resample.on_click(lambda _: setattr(self.seed, "value", self.seed.value + 1))
        self.mask_share.observe(self._keep_split_valid, names="value")
        self.random_share.observe(self._keep_split_valid, names="value")
        for control in (self.probability, self.mask_share, self.random_share, self.seed):
            control.observe(lambda _: self.update(), names="value")
        toolbar = widgets.HBox([self.probability, self.mask_share, self.random_share, self.seed, self.resample,
                                self.export], layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
        toolbar.add_class("bvl-toolbar")
        super().__init__([toolbar, self.offer, self.view])
        if run is not None:
            self.show_run(run)
        else:
            self.set_text(text, text_b)

    # inputs and models -------------------------------------------------------------------------------------
    def set_text(self, text: str, text_b: str | None = None) -> None:
        """Tokenize a new text (pair), cut to the model's positions, and redraw."""
        encoded = encode_text(self.model, self.tokenizer, text, text_b)
        with self._lock:
            self._take_text(text, text_b, encoded)
            self.next_sentence = self._next_sentence()
            self.update()

    def show_run(self, run: TextRun) -> None:
        """Take the batch and the next-sentence scores of a forward already run on the unmasked text (a Workbench's)
        and run only the masked forward; a run of another model or tokenizer (see follow()) is read anew here."""
        if not run.reads(self.model, self.tokenizer):
            self.set_text(run.text, run.text_b)
            return
        with self._lock:
            self._take_text(run.text, run.text_b, run.encoded)
            self.next_sentence = self._next_sentence(split_heads(self.model, run.output)[1])
            self.update()

    def _take_text(self, text: str, text_b: str | None, encoded: EncodedText) -> None:
        self.text, self.text_b = text, text_b or None
        self.inputs = {k: v.cpu() for k, v in encoded.encoding.items()}
        self.truncation: Truncation = encoded.truncation

    def set_model(self, model: torch.nn.Module | None, tokenizer: Any = None) -> None:
        """Predict with another model (and its own tokenizer, if it has one): the text is tokenized again."""
        with self._lock:
            self.model = model
            if tokenizer is not None:
                self.tokenizer = tokenizer
            self.set_text(self.text, self.text_b)
        self._show_offer()

    def follow(self, trainer: Any, interval: float = 2.0) -> None:
        """Predict with the model `trainer` trains, with its tokenizer; the predictions refresh as it trains.

        The preview works on a copy of the model whose weights it refreshes between training steps (at most once
        per `interval` seconds, and when a run ends), so its forward passes never disturb the training.
        """
        if getattr(trainer, "tokenizer", None) is None:
            raise ValueError("the trainer has no tokenizer to read the text with: build it with BertRunner, or pass "
                             "Trainer(..., tokenizer=...).")
        with self._lock:
            if self.follower is not None and self.follower in self.follower.trainer.callbacks:
                self.follower.trainer.callbacks.remove(self.follower)
            snapshot = copy.deepcopy(trainer.model).eval()
            snapshot.requires_grad_(False)
            self.trainer, self.follower = trainer, _TrainerFollower(self, trainer, interval)
            trainer.callbacks.append(self.follower)
            self.set_model(snapshot, trainer.tokenizer)

    def refresh_from_trainer(self) -> None:
        """Copy the followed trainer's current weights and redraw (called between its steps)."""
        if self.trainer is None:
            return
        with self._lock:
            self.model.load_state_dict(self.trainer.model.state_dict())
            self.next_sentence = self._next_sentence()
            self.update()

    def offer_model_from(self, source: Callable[[], Any]) -> None:
        """Offer a button, while the model here has no MLM head, that follows the Trainer `source()` returns."""
        self._model_source = source
        self._show_offer()

    def take_offered_model(self) -> None:
        """The button's action: follow the offered Trainer (building it first if needs be)."""
        if self._model_source is None:
            return
        self.offer_message.value = "preparing the Training tab's model…"
        try:
            self.follow(self._model_source())
        except (ValueError, TypeError, RuntimeError) as error:
            self.offer_message.value = error_html(error)

    def _show_offer(self) -> None:
        needed = self._model_source is not None and self.trainer is None and not self.has_mlm_head
        self.offer.layout.display = None if needed else "none"
        self.offer_message.value = "" if not needed else (
            "a tiny BERT with MLM and NSP heads; it predicts better the longer it trains")

    @property
    def has_mlm_head(self) -> bool:
        return self.model is not None and predicts_masked_tokens(self.model)

    def _keep_split_valid(self, change: dict) -> None:
        """[MASK] share + random share may not exceed 1: lower the other slider."""
        if self.mask_share.value + self.random_share.value > 1.0:
            other = self.random_share if change["owner"] is self.mask_share else self.mask_share
            other.value = round(1.0 - change["new"], 2)

    @property
    def vocab_size(self) -> int:
        return self.model.config.vocab_size if self.model is not None else self.tokenizer.vocab_size

    # masking and predictions -------------------------------------------------------------------------------
    def update(self) -> None:
        """Resample the masking with the current settings, predict, and redraw."""
        with self._lock:
            ids = self.inputs["input_ids"]
            self.plan: MaskingPlan = sample_masking(
                ids, vocab_size=self.vocab_size, special_token_ids=self.tokenizer.all_special_ids,
                attention_mask=self.inputs["attention_mask"], special_tokens_mask=self.inputs["special_tokens_mask"],
                mlm_probability=self.probability.value, mask_replace_prob=self.mask_share.value,
                random_replace_prob=min(self.random_share.value, 1.0 - self.mask_share.value), seed=self.seed.value)
            self.masked_ids, self.labels = apply_masking(ids, self.plan, self.tokenizer.mask_token_id)
            self.predictions = self._predict()
            self.view.svg = self.to_svg()
        self.figure_changed()

    @property
    def counts(self) -> dict[str, int]:
        """How many tokens were eligible, selected, and turned into [MASK] / random / kept."""
        plan = self.plan
        return {"tokens": int(plan.eligible.numel()), "eligible": int(plan.eligible.sum()),
                "selected": int(plan.selected.sum()), "mask": int(plan.to_mask.sum()),
                "random": int(plan.to_random.sum()), "kept": int(plan.kept.sum())}

    def _model_inputs(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        device = next(self.model.parameters()).device
        return {"input_ids": ids.to(device), "attention_mask": self.inputs["attention_mask"].to(device),
                "token_type_ids": self.inputs["token_type_ids"].to(device)}

    def _predict(self) -> list[tuple[int, list[tuple[str, float]]]]:
        """Top-k (token, probability) at each selected position, when the model has an MLM head."""
        if not self.has_mlm_head:
            return []
        scores = head_outputs(self.model, self._model_inputs(self.masked_ids))[0]
        positions = self.plan.selected[0].nonzero().squeeze(1).tolist()
        probs = torch.softmax(scores[0, positions].float(), dim=-1).cpu()
        top = probs.topk(min(self.top_k, probs.shape[-1]), dim=-1)
        tokens = self.tokenizer.convert_ids_to_tokens
        return [(pos, [(tokens([int(i)])[0], float(p)) for p, i in zip(values, indices)])
                for pos, values, indices in zip(positions, top.values, top.indices)]

    def _next_sentence(self, scores: torch.Tensor | None = None) -> float | None:
        """P(B follows A) for a sentence pair, from the unmasked pair, when the model has an NSP head: from `scores`
        when a forward already gave them, else from a forward run here."""
        if self.model is None or self.text_b is None or not predicts_next_sentence(self.model):
            return None
        if scores is None:
            scores = head_outputs(self.model, self._model_inputs(self.inputs["input_ids"]))[1]
        return float(torch.softmax(scores[0].float(), dim=-1)[0])  # label 0 = "B follows A"

    def _fate(self, position: int) -> tuple[str, str]:
        plan = self.plan
        if not plan.eligible[0, position]:
            return "special", "special or padding: never selected"
        if plan.to_mask[0, position]:
            return "mask", "selected → [MASK]"
        if plan.to_random[0, position]:
            return "random", "selected → random token"
        if plan.selected[0, position]:
            return "kept", "selected, kept as is (still predicted)"
        return "untouched", "not selected"

    # what is shown -----------------------------------------------------------------------------------------
    def _cells(self) -> list[Chip]:
        """A chip per position: shown text, the label under it, its fate and its tooltip."""
        original = self.tokenizer.convert_ids_to_tokens(self.inputs["input_ids"][0].tolist())
        shown = self.tokenizer.convert_ids_to_tokens(self.masked_ids[0].tolist())
        cells = []
        for position, (before, after) in enumerate(zip(original, shown)):
            fate, title = self._fate(position)
            text = f"{before} → {after}" if fate == "random" else after
            label = before if self.plan.selected[0, position] else ""
            cells.append(Chip(text, label, fate, f"{title}; position {position}"))
        return cells

    def summary(self) -> str:
        """'5 of 15 eligible tokens selected: 3 → [MASK], 0 → random, 2 kept'."""
        counts = self.counts
        return (f"{counts['selected']} of {counts['eligible']} eligible tokens selected: {counts['mask']} → [MASK], "
                f"{counts['random']} → random, {counts['kept']} kept")

    def settings(self) -> str:
        """The sliders as one line, for titles."""
        return (f"select p {self.probability.value:.2f} · → [MASK] {self.mask_share.value:.2f} · → random "
                f"{min(self.random_share.value, 1.0 - self.mask_share.value):.2f} · seed {self.seed.value}")

    def model_note(self) -> str:
        """Which model predicts, or why there are no predictions ('' without a model)."""
        if self.trainer is not None:
            total = getattr(getattr(self.trainer, "config", None), "max_steps", None)
            return (f"predictions by the Training tab's model (step {self.trainer.step}"
                    + (f" of {total}" if total else "") + ")")
        if self.model is not None and not self.has_mlm_head:
            return (f"No predictions: {type(self.model).__name__} has no masked-LM head (a BERTForMaskedLM or "
                    "BERTForPreTraining predicts the masked tokens).")
        return ""

    def nsp_line(self) -> str:
        """'P(B follows A) = 0.87', for a pair and a model with an NSP head."""
        return "" if self.next_sentence is None else (
            f"next-sentence head: P(B follows A) = {format_probability(self.next_sentence)}")

    def prediction_rows(self) -> list[tuple[str, str, str]]:
        """(position, original token, 'token p, token p, …') per selected position."""
        original = self.tokenizer.convert_ids_to_tokens(self.inputs["input_ids"][0].tolist())
        return [(str(pos), original[pos], ", ".join(f"{token} {format_probability(p)}" for token, p in top))
                for pos, top in self.predictions]

    def headers(self) -> tuple[str, str, str]:
        """The prediction table's column titles."""
        return ("position", "original", f"top-{self.top_k} predictions")

    def state(self) -> MaskingState:
        """What the preview shows, as text: the figure is drawn from it."""
        return MaskingState(title="BERT masking · " + self.settings(), chips=self._cells(), summary=self.summary(),
                            notice=self.truncation.notice if self.truncation.cut else "", nsp=self.nsp_line(),
                            note=self.model_note(), headers=self.headers(), rows=self.prediction_rows())

    def to_svg(self) -> str:
        """The preview on screen (the live view shows this drawing): title, legend, coloured token chips with their
        labels and tooltips, counts, NSP and the top-k predictions."""
        return masking_figure(self.state())
