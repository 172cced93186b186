"""MaskingPreview: mask the tokens you mean (a typed [MASK], a clicked token) or watch BERT's 80/10/10 masking happen
to a text, and see what a masked-LM model of your choice predicts there."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any, Callable

import ipywidgets as widgets
import torch

from bertviz_lab.model.encoding import EncodedText, Truncation, encode_text
from bertviz_lab.model.pretraining import (
    IGNORE_INDEX,
    MASK_PROBABILITY,
    MASK_REPLACE_PROBABILITY,
    RANDOM_REPLACE_PROBABILITY,
    MaskingPlan,
    apply_masking,
    check_masking_probabilities,
    masking_split_label,
    sample_masking,
)
from bertviz_lab.model.weights import initialised_head_note
from bertviz_lab.trace.targets import predicts_masked_tokens, predicts_next_sentence, split_heads
from bertviz_lab.widgets.figures.masking import KEPT_MARK, Chip, MaskingState, masking_figure
from bertviz_lab.widgets.panels.controls import Hold, toggle_buttons
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.model_row import CURRENT, LABELLED, TRAINING, ModelRow
from bertviz_lab.widgets.panels.models import named_model_and_tokenizer
from bertviz_lab.widgets.panels.panel import Panel
from bertviz_lab.widgets.panels.running import evaluating
from bertviz_lab.widgets.panels.text_run import TextRun
from bertviz_lab.widgets.views.masking_view import MaskingView

MODES = ("choose", "sample")  # the typed [MASK]s and the clicked tokens; BERT's random 80/10/10 masking
Prediction = tuple[int, list[tuple[str, float]]]  # (position, the top-k (token, probability), most probable first)


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
    """The text's tokens as chips: click one (or Space on it) to mask or unmask it, or type [MASK] in the text; the
    sample mode shows BERT's 80/10/10 masking instead (sliders for p and the split, a seed, resample). A masked-LM
    model (the one given, the Training tab's, or one by name) predicts every masked position."""

    def __init__(self, tokenizer: Any, text: str, model: torch.nn.Module | None = None, text_b: str | None = None,
                 mlm_probability: float = MASK_PROBABILITY,
                 mask_replace_prob: float = MASK_REPLACE_PROBABILITY,
                 random_replace_prob: float = RANDOM_REPLACE_PROBABILITY,
                 seed: int = 0, top_k: int = 5, run: TextRun | None = None, mode: str | None = None) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be one of {MODES} (or None: choose when the text has a [MASK]), "
                             f"got {mode!r}.")
        check_masking_probabilities(mlm_probability, mask_replace_prob, random_replace_prob)  # a slider would clamp
        self.tokenizer, self.model, self.top_k = tokenizer, model, top_k
        self.own_model, self.own_tokenizer = model, tokenizer  # "the current model": the one given (a Workbench's)
        self.source = CURRENT  # which model predicts: CURRENT, TRAINING, or the name it was loaded by
        self.trainer: Any = None  # the Trainer whose model predicts here (see follow())
        self.follower: _TrainerFollower | None = None
        self.next_sentence: float | None = None
        self.chosen: list[int] = []  # the positions the user masked (choose mode)
        self._predictions: list[Prediction] = []
        self._model_source: Callable[[], Any] | None = None
        self._lock = threading.RLock()  # the training thread and the notebook may both redraw
        self._held = Hold()  # open while the panel sets its own controls
        mask = getattr(tokenizer, "mask_token", None) or "[MASK]"  # the model's own: RoBERTa's is <mask>
        self.mode = toggle_buttons([("choose", "choose"), ("sample 80/10/10", "sample")], "choose",
                                   [f"mask the tokens you click and the {mask}s you type",
                                    f"BERT's random masking: select p, then {masking_split_label(mask)}"])
        self.probability = widgets.FloatSlider(value=mlm_probability, min=0.0, max=1.0, step=0.01,
                                               description="select p", readout_format=".2f", style=LABELLED)
        self.mask_share = widgets.FloatSlider(value=mask_replace_prob, min=0.0, max=1.0, step=0.05,
                                              description=f"→ {mask}", readout_format=".2f", style=LABELLED)
        self.random_share = widgets.FloatSlider(value=random_replace_prob, min=0.0, max=1.0, step=0.05,
                                                description="→ random", readout_format=".2f", style=LABELLED)
        self.seed = widgets.IntText(value=seed, description="seed", style=LABELLED,
                                    layout=widgets.Layout(width="120px"))
        self.resample = widgets.Button(description="resample", icon="refresh", layout=widgets.Layout(width="auto"))
        self.export = ExportBar(self, "masking")
        self.view = MaskingView()
        self.model_row = ModelRow(self.use_model, self._own_model_name())
        self.model_choice, self.model_name = self.model_row.choice, self.model_row.name
        self.load_button, self.model_message = self.model_row.load_button, self.model_row.message
        self.resample.on_click(lambda _: setattr(self.seed, "value", self.seed.value + 1))
        self.mask_share.observe(self._keep_split_valid, names="value")
        self.random_share.observe(self._keep_split_valid, names="value")
        for control in (self.probability, self.mask_share, self.random_share, self.seed, self.mode):
            control.observe(lambda _: self._control_changed(), names="value")
        self.view.observe(self._chosen_in_view, names="chosen")
        toolbar = widgets.HBox([self.mode, self.probability, self.mask_share, self.random_share, self.seed,
                                self.resample, self.export],
                               layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
        toolbar.add_class("bvl-toolbar")
        super().__init__([toolbar, self.model_row, self.view])
        with self._lock:
            with self._held():
                if run is not None and run.reads(self.model, self.tokenizer):
                    self.show_run(run, redraw=False)
                else:
                    text, text_b = (run.text, run.text_b) if run is not None else (text, text_b)
                    self._take_text(text, text_b, encode_text(self.model, self.tokenizer, text, text_b))
                    self.next_sentence = self._next_sentence()
                self.mode.value = mode or ("choose" if self.typed_positions else "sample")
                self._show_model_controls()
            self.update()


    # inputs and models -------------------------------------------------------------------------------------
    def set_text(self, text: str, text_b: str | None = None) -> None:
        """Tokenize a new text (pair), cut to the model's positions, and redraw; a new text with a typed [MASK]
        switches to the choose mode (the [MASK] says which token you mean)."""
        encoded = encode_text(self.model, self.tokenizer, text, text_b)
        with self._lock:
            self._take_text(text, text_b, encoded)
            self.next_sentence = self._next_sentence()
            self.update()

    def show_run(self, run: TextRun, redraw: bool = True) -> None:
        """Take the batch and the next-sentence scores of a forward already run on the unmasked text (a Workbench's)
        and run only the masked forward; a run of another model or tokenizer (see use_model()) is read anew here."""
        if not run.reads(self.model, self.tokenizer):
            self.set_text(run.text, run.text_b)
            return
        with self._lock:
            self._take_text(run.text, run.text_b, run.encoded)
            self.next_sentence = self._next_sentence(split_heads(self._model(), run.output)[1])
            if redraw:
                self.update()

    def _take_text(self, text: str, text_b: str | None, encoded: EncodedText) -> None:
        """Keep the user's masked tokens when the tokens are the same (a device move, a model with the same
        vocabulary); a new text starts with none, in the choose mode when it has a typed [MASK]."""
        inputs = {k: v.cpu() for k, v in encoded.encoding.items()}
        old = getattr(self, "inputs", None)
        same = old is not None and torch.equal(old["input_ids"], inputs["input_ids"])
        self.text, self.text_b = text, text_b or None
        self.inputs = inputs
        self.truncation: Truncation = encoded.truncation
        if not same:
            self._set_chosen([])
            if old is not None and self.typed_positions:
                with self._held():  # the caller redraws
                    self.mode.value = "choose"

    @property
    def typed_positions(self) -> list[int]:
        """Where the text itself says [MASK]: always masked and predicted (there is no original token there)."""
        mask_id = self.tokenizer.mask_token_id
        ids, attended = self.inputs["input_ids"][0], self.inputs["attention_mask"][0].bool()
        return [] if mask_id is None else ((ids == mask_id) & attended).nonzero().squeeze(1).tolist()

    def _own_model_name(self) -> str:
        return "no model" if self.own_model is None else type(self.own_model).__name__

    def set_model(self, model: torch.nn.Module | None, tokenizer: Any = None) -> None:
        """Make `model` (and its own tokenizer, if it has one) the current model, and predict with it."""
        with self._lock:
            self.own_model = model
            if tokenizer is not None:
                self.own_tokenizer = tokenizer
            self._show_model_controls(options=True)
            self.use_model(CURRENT)

    def use_model(self, which: str) -> None:
        """Predict with "current" (the model given), "training" (the Training tab's, refreshed as it trains) or the
        model a Hub name or checkpoint folder names (loaded once per session); the text is tokenized again with that
        model's tokenizer. Errors (a name not in the Hub cache offline, no Training tab) raise, nothing changes."""
        if not isinstance(which, str) or not which.strip():
            raise ValueError(f"which must be 'current', 'training' or a Hub name or folder, got {which!r}.")
        which = which.strip()
        with self._lock:
            if which == TRAINING:
                if self._model_source is None:
                    raise ValueError("there is no Training tab here: use_model('training') needs offer_model_from().")
                self.follow(self._model_source())
                return
            if which == CURRENT:
                model, tokenizer = self.own_model, self.own_tokenizer
            else:
                model, tokenizer = named_model_and_tokenizer(which)
            self._stop_following()
            self._predict_with(model, tokenizer, which)

    def _predict_with(self, model: torch.nn.Module | None, tokenizer: Any, source: str) -> None:
        self.model, self.tokenizer, self.source = model, tokenizer, source
        self.set_text(self.text, self.text_b)
        self._show_model_controls()

    def follow(self, trainer: Any, interval: float = 2.0) -> None:
        """Predict with the model `trainer` trains, with its tokenizer; the predictions refresh as it trains.

        The preview works on a copy of the model whose weights it refreshes between training steps (at most once
        per `interval` seconds, and when a run ends), so its forward passes never disturb the training.
        """
        if getattr(trainer, "tokenizer", None) is None:
            raise ValueError("the trainer has no tokenizer to read the text with: build it with BertRunner, or pass "
                             "Trainer(..., tokenizer=...).")
        with self._lock:
            self._stop_following()
            snapshot = copy.deepcopy(trainer.model).eval()
            snapshot.requires_grad_(False)
            self.trainer, self.follower = trainer, _TrainerFollower(self, trainer, interval)
            trainer.callbacks.append(self.follower)
            self._predict_with(snapshot, trainer.tokenizer, TRAINING)

    def _stop_following(self) -> None:
        if self.follower is not None and self.follower in self.follower.trainer.callbacks:
            self.follower.trainer.callbacks.remove(self.follower)
        self.trainer, self.follower = None, None

    def refresh_from_trainer(self) -> None:
        """Copy the followed trainer's current weights and redraw (called between its steps)."""
        if self.trainer is None:
            return
        with self._lock:
            self._model().load_state_dict(self.trainer.model.state_dict())
            self.next_sentence = self._next_sentence()
            self.update()

    def offer_model_from(self, source: Callable[[], Any]) -> None:
        """List "the Training tab's model" under "predict with": the Trainer `source()` returns (built when it is
        first chosen)."""
        self._model_source = source
        self._show_model_controls(options=True)

    def _show_model_controls(self, options: bool = False) -> None:
        """The model row shows the model in use (its choices listed anew with `options`)."""
        if options:
            self.model_row.offer(own_model=self._own_model_name(), training=self._model_source is not None)
        self.model_row.show(self.source)

    @property
    def has_mlm_head(self) -> bool:
        return self.model is not None and predicts_masked_tokens(self.model)

    def _keep_split_valid(self, change: dict) -> None:
        """[MASK] share + random share may not exceed 1: lower the other slider."""
        if self.mask_share.value + self.random_share.value > 1.0:
            other = self.random_share if change["owner"] is self.mask_share else self.mask_share
            other.value = round(1.0 - change["new"], 2)

    def _model(self) -> torch.nn.Module:
        """The model predicting: the paths that ask for it run only once one is set (an MLM head, a run it read)."""
        if self.model is None:
            raise ValueError("the masking panel has no model: give it one with set_model() or use_model().")
        return self.model

    @property
    def vocab_size(self) -> int:
        if self.model is None:
            return self.tokenizer.vocab_size
        return getattr(self.model, "config").vocab_size  # any BERT's config (ours, Hugging Face's), read by name

    # masking and predictions -------------------------------------------------------------------------------
    def _control_changed(self) -> None:
        if not self._held:
            self.update()

    def _set_chosen(self, positions: list[int]) -> None:
        """The user's masked positions, here and in the view (the view's change then does nothing more)."""
        self.chosen = sorted(set(positions))
        with self._held():
            self.view.chosen = list(self.chosen)

    def _chosen_in_view(self, change: dict) -> None:
        """A chip clicked in a front end: mask or unmask those tokens (in the choose mode, which a click selects)."""
        if self._held:
            return
        with self._lock:
            can = set(self.toggleable_positions)
            wanted = [p for p in change["new"] if isinstance(p, int) and p in can]
            with self._held():
                self._set_chosen(wanted)
                self.mode.value = "choose"
            self.update()

    def toggle(self, position: int) -> None:
        """Mask the token at `position`, or unmask it (what a click on its chip does); selects the choose mode."""
        if position not in self.toggleable_positions:
            raise ValueError(f"position {position!r} is not a token a click masks: pick one of "
                             f"{self.toggleable_positions} (special tokens, padding and typed [MASK]s are not).")
        chosen = set(self.chosen) ^ {position}
        self.view.chosen = sorted(chosen)  # observed: as a front end's click is

    @property
    def toggleable_positions(self) -> list[int]:
        """The positions a click masks or unmasks: every token but the special ones, padding and typed [MASK]s."""
        return self._eligible()[0].nonzero().squeeze(1).tolist()

    def _eligible(self) -> torch.Tensor:
        """(1, T) bool: not special, not padding (a typed [MASK] is special)."""
        return sample_masking(self.inputs["input_ids"], vocab_size=self.vocab_size,
                              special_token_ids=self.tokenizer.all_special_ids,
                              attention_mask=self.inputs["attention_mask"],
                              special_tokens_mask=self.inputs["special_tokens_mask"], mlm_probability=0.0,
                              seed=0).eligible

    def _plan(self) -> MaskingPlan:
        """The sampled 80/10/10 plan, or the user's chosen tokens as [MASK]; typed [MASK]s selected in both."""
        ids = self.inputs["input_ids"]
        if self.mode.value == "sample":
            plan = sample_masking(
                ids, vocab_size=self.vocab_size, special_token_ids=self.tokenizer.all_special_ids,
                attention_mask=self.inputs["attention_mask"], special_tokens_mask=self.inputs["special_tokens_mask"],
                mlm_probability=self.probability.value, mask_replace_prob=self.mask_share.value,
                random_replace_prob=min(self.random_share.value, 1.0 - self.mask_share.value), seed=self.seed.value)
        else:
            eligible = self._eligible()
            chosen = torch.zeros_like(eligible)
            chosen[0, [p for p in self.chosen if p < ids.shape[1]]] = True
            chosen &= eligible
            plan = MaskingPlan(chosen, chosen.clone(), torch.zeros_like(chosen), ids.clone(), eligible)
        typed = torch.zeros_like(plan.selected)
        typed[0, self.typed_positions] = True
        return plan._replace(selected=plan.selected | typed, to_mask=plan.to_mask | typed)

    def update(self) -> None:
        """Mask (the chosen tokens, or a sample with the current settings), predict, and redraw."""
        with self._lock:
            ids = self.inputs["input_ids"]
            for control in (self.probability, self.mask_share, self.random_share, self.seed, self.resample):
                control.disabled = self.mode.value != "sample"
            self.plan: MaskingPlan = self._plan()
            self.masked_ids, labels = apply_masking(ids, self.plan, self.tokenizer.mask_token_id)
            labels[0, self.typed_positions] = IGNORE_INDEX  # a typed [MASK] has no original token to learn
            self.labels = labels
            self._predictions = self._predict()
            self.view.svg = self.to_svg()
        self.figure_changed()

    def predictions(self) -> list[Prediction]:
        """For each masked position (every selected one, typed [MASK]s included), in order: (position, the top-k
        (token, probability) pairs the model predicts there); [] when the model has no masked-LM head."""
        return [(position, list(top)) for position, top in self._predictions]

    @property
    def counts(self) -> dict[str, int]:
        """How many tokens were eligible, selected, and turned into [MASK] / random / kept (typed [MASK]s aside)."""
        plan = self.plan
        selected = plan.selected & plan.eligible
        return {"tokens": int(plan.eligible.numel()), "eligible": int(plan.eligible.sum()),
                "selected": int(selected.sum()), "mask": int((plan.to_mask & plan.eligible).sum()),
                "random": int(plan.to_random.sum()), "kept": int(plan.kept.sum())}

    def _model_inputs(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        device = next(self._model().parameters()).device
        return {"input_ids": ids.to(device), "attention_mask": self.inputs["attention_mask"].to(device),
                "token_type_ids": self.inputs["token_type_ids"].to(device)}

    def _predict(self) -> list[Prediction]:
        """Top-k (token, probability) at each selected position, when the model has an MLM head."""
        positions = self.plan.selected[0].nonzero().squeeze(1).tolist()
        if not self.has_mlm_head or not positions:
            return []
        scores = head_outputs(self._model(), self._model_inputs(self.masked_ids))[0]
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

    @property
    def mask_text(self) -> str:
        """The tokenizer's mask token, as the panel's words name it ([MASK] for BERT, <mask> for RoBERTa)."""
        return getattr(self.tokenizer, "mask_token", None) or "[MASK]"

    def _fate(self, position: int) -> tuple[str, str]:
        plan = self.plan
        if plan.to_mask[0, position] and not plan.eligible[0, position]:
            return "mask", f"typed {self.mask_text}: always masked, predicted"
        if not plan.eligible[0, position]:
            return "special", "special or padding: never masked"
        if plan.to_mask[0, position]:
            return "mask", "masked by you" if self.mode.value == "choose" else f"selected → {self.mask_text}"
        if plan.to_random[0, position]:
            return "random", "selected → random token"
        if plan.selected[0, position]:
            return "kept", "selected, kept as is (still predicted)"
        return "untouched", "not selected" if self.mode.value == "sample" else "not masked"

    # what is shown -----------------------------------------------------------------------------------------
    def _cells(self) -> list[Chip]:
        """A chip per position: shown text, the label under it, its fate, its tooltip, and whether a click masks it."""
        original = self.tokenizer.convert_ids_to_tokens(self.inputs["input_ids"][0].tolist())
        shown = self.tokenizer.convert_ids_to_tokens(self.masked_ids[0].tolist())
        typed, eligible = set(self.typed_positions), self.plan.eligible[0].tolist()
        cells = []
        for position, (before, after) in enumerate(zip(original, shown)):
            fate, title = self._fate(position)
            text = {"random": f"{before} → {after}", "kept": KEPT_MARK + after}.get(fate, after)
            label = "typed" if position in typed else before if self.plan.selected[0, position] else ""
            action = "; click or Space: " + ("unmask" if fate == "mask" else "mask") if eligible[position] else ""
            cells.append(Chip(text, label, fate, f"{title}; position {position}{action}", position,
                              bool(eligible[position]), before))
        return cells

    def summary(self) -> str:
        """'5 of 15 eligible tokens selected: 3 → [MASK], 0 → random, 2 kept' (sample) or '2 masked: …' (choose)."""
        counts, typed, mask = self.counts, len(self.typed_positions), self.mask_text
        if self.mode.value == "choose":
            return (f"{counts['mask'] + typed} masked: {typed} typed {mask}, {counts['mask']} clicked of "
                    f"{counts['eligible']} tokens")
        return (f"{counts['selected']} of {counts['eligible']} eligible tokens selected: {counts['mask']} → {mask}, "
                f"{counts['random']} → random, {counts['kept']} kept" + (f"; {typed} typed {mask}" if typed else ""))

    def settings(self) -> str:
        """The mode and, when sampling, the sliders, as one line, for titles."""
        if self.mode.value == "choose":
            return f"your choice: typed {self.mask_text}s and clicked tokens"
        return (f"select p {self.probability.value:.2f} · → {self.mask_text} {self.mask_share.value:.2f} · → random "
                f"{min(self.random_share.value, 1.0 - self.mask_share.value):.2f} · seed {self.seed.value}")

    def hint(self) -> str:
        """How to mask a token, under the chips."""
        if self.mode.value == "sample":
            return "click a token (or Tab to it, Space) to choose the masked tokens yourself"
        if not self.plan.selected.any():
            return f"click a token (or Tab to it, arrows, Space) to mask it, or type {self.mask_text} in the text"
        return "click a token (or Tab to it, arrows, Space) to mask or unmask it"

    def model_note(self) -> str:
        """Which model predicts, or why there are no predictions."""
        if self.trainer is not None:
            total = getattr(getattr(self.trainer, "config", None), "max_steps", None)
            return (f"predictions by the Training tab's model (step {self.trainer.step}"
                    + (f" of {total}" if total else "") + ")")
        if self.model is None:
            return "No model predicts here: pick one under \"predict with\"."
        if not self.has_mlm_head:
            training = "the Training tab's model, " if self._model_source is not None else ""
            return (f"No predictions: {type(self.model).__name__} has no masked-LM head. Under \"predict with\", pick "
                    f"{training}a checkpoint folder (what bertviz-lab train writes to its checkpoint_dir) or a Hub "
                    "name (e.g. bert-base-uncased; offline, one the Hugging Face cache holds).")
        untrained = initialised_head_note(self.model)
        return "predictions by " + (f"this model ({type(self.model).__name__})" if self.source == CURRENT
                                    else self.source) + (f"; {untrained}" if untrained else "")

    def nsp_line(self) -> str:
        """'P(B follows A) = 0.87', for a pair and a model with an NSP head."""
        return "" if self.next_sentence is None else (
            f"next-sentence head: P(B follows A) = {format_probability(self.next_sentence)}")

    def prediction_rows(self) -> list[tuple[str, str, str]]:
        """(position, original token, 'token p, token p, …') per masked position."""
        original = self.tokenizer.convert_ids_to_tokens(self.inputs["input_ids"][0].tolist())
        typed = set(self.typed_positions)
        return [(str(pos), f"(typed {self.mask_text})" if pos in typed else original[pos],
                 ", ".join(f"{token} {format_probability(p)}" for token, p in top)) for pos, top in self._predictions]

    def headers(self) -> tuple[str, str, str]:
        """The prediction table's column titles."""
        return ("position", "original", f"top-{self.top_k} predictions")

    def state(self) -> MaskingState:
        """What the preview shows, as text: the figure is drawn from it."""
        return MaskingState(title="BERT masking · " + self.settings(), chips=self._cells(), summary=self.summary(),
                            notice=self.truncation.notice if self.truncation.cut else "", nsp=self.nsp_line(),
                            note=self.model_note(), headers=self.headers(), rows=self.prediction_rows(),
                            mode=self.mode.value, hint=self.hint())

    def to_svg(self) -> str:
        """The preview on screen (the live view shows this drawing): title, legend, token chips marked by their
        fate, counts, NSP and the top-k predictions."""
        return masking_figure(self.state())
