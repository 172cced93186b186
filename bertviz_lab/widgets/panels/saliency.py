"""SaliencyPanel: which input tokens an output rests on, each token coloured by its saliency score.

The scores come from `bertviz_lab.trace.saliency` (integrated gradients or gradient × input on the word embeddings).
The figure is one drawing (figures.saliency): the live view (views/saliency_view.js) shows it and adds hover from the
tokens and exact float32 scores it holds, and the static copy and exports hold the same document, so a reload or a
second tab shows the same figure. Token text is always escaped.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Mapping
from typing import Any

import ipywidgets as widgets
import numpy as np
import torch

from bertviz_lab.model.encoding import EncodedText, Truncation, encode_text
from bertviz_lab.model.weights import initialised_head_note
from bertviz_lab.trace.saliency import BASELINES, MAX_STEPS, METHODS, check_choice, check_steps, saliency
from bertviz_lab.trace.targets import HiddenUnit, TargetChoice, target_choices
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.controls import labelled, lean, toggle_buttons, toolbar
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.panel import Panel, notice_html
from bertviz_lab.widgets.panels.running import evaluating, model_lock
from bertviz_lab.widgets.panels.text_run import TextRun
from bertviz_lab.widgets.views.saliency import SaliencyView

METHOD_NAMES = {"integrated_gradients": "integrated gradients", "gradient_x_input": "gradient × input"}
BASELINE_NAMES = {"pad": "[PAD]", "mask": "[MASK]"}
DEFAULT_TEXT = "The cat sat on the mat because it was warm."
DEFAULT_MASKED_TEXT = "The cat sat on the [MASK] because it was warm."
CACHE_SIZE = 32  # computed score vectors kept per panel
PROGRESS_UPDATES = 8  # a long integrated-gradients run goes through the model in about this many batches, one
# progress update each; a batch holds at least MIN_BATCH_TOKENS tokens, so a short run is not split into forwards
# too small to be efficient (on a 2-core CPU, 8-point batches of a 13-token text took 1.5-3x as long as one batch)
MIN_BATCH_TOKENS = 2048
PROGRESS_INTERVAL_S = 0.1  # at most one progress message per this many seconds (the last one is always sent)

# the panel -------------------------------------------------------------------------------------------------------
def _forward(model: torch.nn.Module, inputs: Mapping[str, torch.Tensor]) -> Any:
    with evaluating(model), torch.inference_mode():
        return model(**inputs)


def _custom_choice(target: Any) -> TargetChoice:
    """A target the user passed that the toolbar does not offer (a callable, or a shorthand of other indices)."""
    if callable(target):
        what = f"custom function {getattr(target, '__name__', type(target).__name__)}"
    else:
        what = repr(target)
    return TargetChoice("custom", f"custom: {what}", what, target)


@dataclasses.dataclass(frozen=True)
class _Job:
    """One saliency computation the panel asked for, what it is kept under, and the figure's text for it."""

    key: tuple
    encoding: Mapping[str, torch.Tensor]
    target: Any
    method: str
    steps: int
    baseline: str
    title: str
    subtitle: str
    note: str
    export_name: str


class SaliencyPanel(Panel):
    """A text's tokens coloured by how much each moves a chosen output, with a toolbar for the target, the method
    (gradient × input or integrated gradients), the baseline and the steps, and an export button.

    Scores are computed once per text, target, method, baseline and steps (and kept); changes made in the toolbar
    compute in the background with the view showing "computing…" over the previous figure, dimmed, and how many
    steps of integrated gradients are done (a long run goes in about PROGRESS_UPDATES batches), so the notebook
    stays usable meanwhile.
    Problems (a target the text or model cannot give, a text the model cannot read) are shown in the panel.
    """

    def __init__(self, model: torch.nn.Module | str | None = None, tokenizer: Any = None, text: str | None = None,
                 text_b: str | None = None, *, target: Any = None, method: str = "integrated_gradients",
                 steps: int = 64, baseline: str = "pad") -> None:
        check_choice("method", method, METHODS)
        check_choice("baseline", baseline, BASELINES)
        check_steps(steps)
        from bertviz_lab.widgets.panels.models import model_and_tokenizer

        self.model, self.tokenizer = model_and_tokenizer(model, tokenizer)
        self.background = True  # toolbar changes compute on a worker thread
        self._asked: Any = target  # what the user asked for: a toolbar key, a shorthand or a callable
        self._choices: dict[str, TargetChoice] = {}
        self._default, self._default_note, self._unavailable = "", "", ""
        self._cache: collections.OrderedDict[tuple, np.ndarray] = collections.OrderedDict()
        self._lock = threading.RLock()  # the figure's state: the notebook and the worker both draw
        self._wanted: tuple | None = None
        self._shown: tuple | None = None
        self._pending: _Job | None = None
        self._worker: threading.Thread | None = None
        self._quiet = False
        self.encoded: EncodedText | None = None
        self.truncation: Truncation | None = None
        self.text: str = ""
        self.text_b: str | None = None
        self.target_choice = lean(widgets.Dropdown, options=[], layout={"width": "auto", "max_width": "420px"})
        self.unit = lean(widgets.BoundedIntText, value=0, min=0, max=max(0, self._hidden_size() - 1),
                         layout={"width": "80px"})
        # shown only for targets that take a unit, so its box keeps a layout of its own
        self.unit_box = widgets.HBox([lean(widgets.Label, "unit"), self.unit],
                                     layout=widgets.Layout(align_items="center", width="auto"))
        self.method = toggle_buttons(
            [("gradient × input", "gradient_x_input"), ("integrated gradients", "integrated_gradients")], method,
            ["gradient times input: one backward pass", "integrated gradients from the baseline to the text"])
        self.baseline = toggle_buttons([("[PAD]", "pad"), ("[MASK]", "mask")], baseline,
                                       ["every word replaced by [PAD]", "every word replaced by [MASK]"])
        self.steps = lean(widgets.BoundedIntText, value=steps, min=1, max=MAX_STEPS, layout={"width": "80px"})
        self.export_bar = ExportBar(self, "saliency")
        self.toolbar = toolbar(labelled("target", self.target_choice), self.unit_box, labelled("method", self.method),
                               labelled("baseline", self.baseline), labelled("steps", self.steps), self.export_bar)
        self.toolbar.add_class("bvl-saliency-toolbar")
        self.truncation_notice = lean(widgets.HTML)
        self.message = lean(widgets.HTML)
        self.view = lean(SaliencyView)
        super().__init__([self.toolbar, self.truncation_notice, self.message, self.view])
        if text is None:
            mask = getattr(self.tokenizer, "mask_token", None) or "[MASK]"  # RoBERTa's is <mask>
            text = DEFAULT_MASKED_TEXT.replace("[MASK]", mask) if self._predicts_masks() else DEFAULT_TEXT
        self.set_text(text, text_b)
        self.target_choice.observe(self._target_picked, names="value")
        for control in (self.unit, self.method, self.baseline, self.steps):
            control.observe(self._control_changed, names="value")

    # what is shown -------------------------------------------------------------------------------------------
    @property
    def choice(self) -> TargetChoice | None:
        """The target chosen in the toolbar (None while none fits)."""
        return self._choices.get(self.target_choice.value)

    @property
    def target(self) -> Any:
        """What saliency() receives for the chosen target: a shorthand or a callable (None while none fits)."""
        choice = self.choice
        if choice is None:
            return None
        return HiddenUnit(int(self.unit.value)) if choice.unit else choice.target

    @property
    def tokens(self) -> list[str]:
        """The tokens on screen, as the model reads them."""
        return list(self.view.tokens)

    @property
    def scores(self) -> np.ndarray:
        """The scores on screen, float32, one per token."""
        return self.view.values()

    def options(self) -> list[tuple[str, str]]:
        """(label, key) of every target the toolbar offers."""
        return list(self.target_choice.options)

    # text ----------------------------------------------------------------------------------------------------
    def set_text(self, text: str, text_b: str | None = None) -> None:
        """Score a new text (pair); a text the model cannot read is shown as an error in the panel."""
        try:
            encoded = encode_text(self.model, self.tokenizer, text, text_b)
            self._load(text, text_b, encoded, _forward(self.model, encoded.inputs))
        except Exception as error:  # shown in the panel, like every other problem of this view
            self.text, self.text_b = text if isinstance(text, str) else "", text_b or None
            title, subtitle, _ = self._header()
            self._show_error(f"{type(error).__name__}: {error}", title, subtitle)
            return
        self._update(background=False)

    def show_run(self, run: TextRun) -> None:
        """Score the text of a forward already run (a Workbench's): its batch and predictions are reused; only the
        backward passes saliency needs run here."""
        self.model, self.tokenizer = run.model, run.tokenizer
        self._quiet = True
        try:
            self.unit.max = max(0, self._hidden_size() - 1)
        finally:
            self._quiet = False
        self._load(run.text, run.text_b, run.encoded, run.output)
        self._update(background=False)

    def rerun(self, *_: Any) -> None:
        """Compute again (e.g. after training changed the weights), forgetting every kept score."""
        with self._lock:
            self._cache.clear()
            self._shown = None
        self.set_text(self.text, self.text_b)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the computation the toolbar started; True when none is running any more."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
        worker = self._worker
        return worker is None or not worker.is_alive()

    def _hidden_size(self) -> int:
        return int(getattr(getattr(self.model, "config", None), "hidden_size", 1) or 1)

    def _predicts_masks(self) -> bool:
        from bertviz_lab.trace.targets import predicts_masked_tokens

        return predicts_masked_tokens(self.model)

    def _load(self, text: str, text_b: str | None, encoded: EncodedText, output: Any) -> None:
        """Take a text's batch, work out the targets that fit, and choose the one asked for (or the default)."""
        choices, default, note = target_choices(self.model, self.tokenizer, encoded.encoding, output)
        with self._lock:
            self._wanted = None  # a result still computing for the previous text is not drawn
            self.text, self.text_b, self.encoded, self.truncation = text, text_b or None, encoded, encoded.truncation
            self._default, self._default_note = default, note
            self.truncation_notice.value = notice_html(self.truncation)
            key, self._unavailable = self._resolve(self._asked, choices)
            if key == "custom":
                choices = [*choices, _custom_choice(self._asked)]
            self._choices = {c.key: c for c in choices}
            options = [(c.label, c.key) for c in choices]
            if self._unavailable:
                options.append(("(no target fits)", "unavailable"))
                key = "unavailable"
            self._quiet = True
            try:
                self.target_choice.options = options
                self.target_choice.value = key if options else None
            finally:
                self._quiet = False

    def _resolve(self, asked: Any, choices: list[TargetChoice]) -> tuple[str, str]:
        """(toolbar key, "" or why the asked target does not fit) for what the user asked for.

        None: the default; a toolbar key; "mlm" (the top prediction at the first [MASK]), "nsp", "class" (the
        predicted one); a shorthand tuple or a callable (offered as "custom" unless the toolbar has it).
        """
        keys = [c.key for c in choices]
        model = type(self.model).__name__
        if asked is None:
            return (self._default, "") if self._default else ("", "no target fits this model and text.")
        if isinstance(asked, str) and asked in keys:
            return asked, ""
        if asked == "mlm":
            key = next((c.key for c in choices if c.key.startswith("mlm:") and "[MASK]" in c.title), "")
            if key:
                return key, ""
            if any(k.startswith("mlm:") for k in keys) or self._predicts_masks():
                return "", ("target 'mlm' scores the top prediction at the first [MASK], but the text has no [MASK]; "
                            "put [MASK] in the text or choose another target.")
            return "", f"target 'mlm' needs a masked-LM head, which {model} does not have; choose another target."
        if asked == "nsp":
            return "", f"target 'nsp' needs a next-sentence head, which {model} does not have; choose another target."
        if asked == "class":
            key = next((c.key for c in choices if c.key.startswith("class:") and "predicted" in c.label), "")
            key = key or next((k for k in keys if k.startswith("class:")), "")
            return (key, "") if key else ("", f"target 'class' needs a sequence-classification head, which {model} "
                                               "does not have; choose another target.")
        if isinstance(asked, str):
            return "", f"target {asked!r} is not offered for this model and text; choose a target in the toolbar."
        key = next((c.key for c in choices if not c.unit and isinstance(asked, tuple) and c.target == asked), "")
        return key or "custom", ""

    # computing -----------------------------------------------------------------------------------------------
    def _target_picked(self, change: dict) -> None:
        if self._quiet or change["new"] in (None, "unavailable"):
            return
        self._asked = change["new"] if change["new"] != "custom" else self._choices["custom"].target
        if self._unavailable:  # the placeholder goes once a target that fits is chosen
            self._unavailable = ""
            self.target_choice.options = [o for o in self.target_choice.options if o[1] != "unavailable"]
        self._update(background=self.background)

    def _control_changed(self, _: Any) -> None:
        if not self._quiet:
            self._update(background=self.background)

    def _header(self) -> tuple[str, str, str]:
        """The figure's title (method, baseline, steps), its target line and its note, from the toolbar."""
        method = self.method.value
        if method == "integrated_gradients":
            title = (f"Saliency · {METHOD_NAMES[method]} · {BASELINE_NAMES[self.baseline.value]} baseline · "
                     f"{self.steps.value} steps")
        else:
            title = f"Saliency · {METHOD_NAMES[method]} (no baseline, no steps)"
        choice = self.choice
        if choice is None:
            what = "none"
        elif choice.unit:
            what = f"unit {int(self.unit.value)} of the last layer's [CLS] vector"
        else:
            what = choice.title
        notes = [self._default_note] if self._default_note and choice is not None and choice.key == self._default \
            else []
        untrained = initialised_head_note(self.model) if choice is not None and choice.reads_head else ""
        if untrained:
            notes.insert(0, untrained)
        if self.truncation is not None and self.truncation.cut:
            notes.append(self.truncation.notice)
        return title, f"target: {what}", "; ".join(notes)

    def _job(self) -> _Job | None:
        choice = self.choice
        if choice is None or self.encoded is None:
            return None
        method, steps, baseline = self.method.value, int(self.steps.value), self.baseline.value
        what = f"cls-unit:{int(self.unit.value)}" if choice.unit else choice.key
        if choice.key == "custom":
            what = f"custom:{id(choice.target)}"
        integrated = method == "integrated_gradients"
        key = (id(self.model), self.text, self.text_b, what, method, baseline if integrated else None,
               steps if integrated else None)
        slug = "".join(ch if ch.isalnum() else "-" for ch in what).strip("-")
        return _Job(key, self.encoded.encoding, self.target, method, steps, baseline, *self._header(),
                    f"saliency-{method.replace('_', '-')}-{slug}")

    def _update(self, background: bool) -> None:
        """Show the scores for what the toolbar says: kept ones at once, else computed (in the background when
        asked from the toolbar)."""
        choice = self.choice
        self.unit_box.layout.display = None if (choice is not None and choice.unit) else "none"
        self.baseline.disabled = self.steps.disabled = self.method.value != "integrated_gradients"
        job = self._job()
        with self._lock:
            if self._unavailable or job is None:
                self._wanted = None
                title, subtitle, _ = self._header()
                self._show_error(self._unavailable or "no target fits this model and text.", title, subtitle)
                return
            self._wanted = job.key
            if job.key == self._shown and self.view.status == "ready":
                self._pending = None
                return
            kept = self._cache.get(job.key)
            if kept is not None:
                self._pending = None
                self._draw(job, kept)
                return
            integrated = job.method == "integrated_gradients"
            self.view.computing(f"{job.title} · {job.subtitle}", "Integrated gradients" if integrated else "",
                                job.steps if integrated else 0)
            if background:
                self._pending = job
                if self._worker is None or not self._worker.is_alive():
                    self._worker = threading.Thread(target=self._work, name="bertviz-saliency", daemon=True)
                    self._worker.start()
                return
            self._pending = None
        self._run(job)

    def _run(self, job: _Job) -> None:
        """Compute one job and show its result, or its error, if it is still what the toolbar asks for."""
        try:
            scores = self._compute(job)
        except Exception as error:  # shown in the panel: a cell must not fail on a target that does not fit
            with self._lock:
                if self._wanted == job.key:
                    self._show_error(f"{type(error).__name__}: {error}", job.title, job.subtitle)
            return
        with self._lock:
            if self._wanted == job.key:
                self._draw(job, scores)

    def _compute(self, job: _Job) -> np.ndarray:
        rows, length = job.encoding["input_ids"].shape
        points = job.steps * int(rows)
        # a few batches, so the view can say how far a long run is (the memory budget may make them smaller)
        batch = max(-(-points // PROGRESS_UPDATES), -(-MIN_BATCH_TOKENS // max(1, int(length))), 1)
        with model_lock(self.model):  # no other panel's run on this model meanwhile (its trace would see ours)
            scores = saliency(self.model, job.encoding, job.target, method=job.method, steps=job.steps,
                              baseline=job.baseline, tokenizer=self.tokenizer, internal_batch_size=batch,
                              progress=self._progress_of(job))[0].numpy()
        with self._lock:
            self._cache[job.key] = scores
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return scores

    def _progress_of(self, job: _Job) -> Any:
        """saliency()'s progress callback for `job`: the view's progress line follows while `job` is the one shown
        computing, at most every PROGRESS_INTERVAL_S seconds (each message crosses to the browser as it is sent,
        also from the notebook's own thread while the cell runs)."""
        sent = [float("-inf")]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if done < total and now - sent[0] < PROGRESS_INTERVAL_S:
                return
            sent[0] = now
            with self._lock:
                if self._wanted == job.key:
                    self.view.progress(done, total)

        return progress

    def _work(self) -> None:
        """The worker thread: compute the newest request until none is left."""
        while True:
            with self._lock:
                job, self._pending = self._pending, None
                if job is None:
                    self._worker = None
                    return
            self._run(job)

    def _draw(self, job: _Job, scores: np.ndarray) -> None:
        encoding = job.encoding
        ids = encoding["input_ids"][0].tolist()
        mask = encoding["attention_mask"][0].tolist() if "attention_mask" in encoding else [1] * len(ids)
        keep = [p for p, m in enumerate(mask) if m]
        types = encoding["token_type_ids"][0].tolist() if "token_type_ids" in encoding else [0] * len(ids)
        special = encoding["special_tokens_mask"][0].tolist() if "special_tokens_mask" in encoding else [0] * len(ids)
        tokens = self.tokenizer.convert_ids_to_tokens([ids[p] for p in keep])
        self.view.show(tokens, keep, [types[p] for p in keep], [bool(special[p]) for p in keep],
                       np.asarray(scores, dtype=np.float32)[keep], job.title, job.subtitle, job.note)
        self._shown = job.key
        self.message.value = ""
        self.export_bar.name = job.export_name
        self.figure_changed()

    def _show_error(self, message: str, title: str, subtitle: str) -> None:
        with self._lock:
            self.view.show_error(title, subtitle, message)
            self._shown = None
            self.message.value = f"<span class='bvl-saliency-error'>{escape(message)}</span>"
        self.figure_changed()

    # figure --------------------------------------------------------------------------------------------------
    def to_plotly(self) -> Any:
        """The scores on screen as a plotly bar chart (one bar a token, the figure's diverging colours, its title and
        target line), for a plotly dashboard."""
        from bertviz_lab.widgets.figures.plotly_figures import saliency_figure

        title, subtitle, note = self._header()
        return saliency_figure(self.tokens, self.scores, title, "; ".join(part for part in (subtitle, note) if part))

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document."""
        return self.view.to_svg()

    def static_html(self) -> str:
        """The figure on screen as self-contained HTML (its SVG; no scripts, no network)."""
        return f"<div class='bvl-figure bvl-saliency'>{self.to_svg()}</div>"
