"""The Patching panel: two texts that differ in one fact ("France" / "Italy"), the answer the model gives at the
clean text's mask token, and which layer, position or head carries the difference (trace.patch, drawn as ROME's
causal-tracing map).

The panel computes nothing of its own: `bertviz_lab.trace.patch` patches, and the metric reads the model's own
masked-LM logits at the mask, so `panel.result` is exactly what `patch(model, clean, corrupted, metric, point)`
returns for the same metric.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import ipywidgets as widgets
import torch

from bertviz_lab.model.encoding import EncodedText, check_texts, encode_text
from bertviz_lab.trace.logit_lens import mlm_head
from bertviz_lab.trace.patching import PatchResult, patch
from bertviz_lab.trace.targets import split_heads
from bertviz_lab.widgets.figures.patching import POINT_LABELS, POINT_TITLES, exact, head_grid_svg, patching_svg
from bertviz_lab.widgets.panels.controls import LABEL_STYLE, Hold, lean, toggle_buttons, toolbar
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.model_label import model_name
from bertviz_lab.widgets.panels.panel import Panel, error_html
from bertviz_lab.widgets.panels.running import evaluating, threads_for
from bertviz_lab.widgets.views.cell_grid import CellGridView

CLEAN = "The capital of France is [MASK]."
CORRUPTED = "The capital of Italy is [MASK]."
METRICS = ("logit difference", "probability")
METRIC_TIPS = ("logit[target] − logit[foil] at the mask: how far the model prefers the target to the foil",
               "softmax probability of the target at the mask")
POINT_TIPS = {  # the hook points each choice patches (trace.patching.POINTS)
    "hidden": "encoder.layer.{l}.hidden: the residual stream after layer l, one position at a time",
    "attn_out": "encoder.layer.{l}.attention.output.attn_out: the attention block's output, one position at a time",
    "mlp_out": "encoder.layer.{l}.output.mlp_out: the feed-forward block's output, one position at a time",
    "head_out": "encoder.layer.{l}.attention.output.head_out: one head's share of the attention output, "
                "at every position",
}
TOP_OPTIONS = 10  # the model's predictions offered in the target and foil boxes
Opened = Callable[[int, "int | None", "int | None"], None]
_UNSET: Any = object()


@dataclass(frozen=True)
class PatchingInputs:
    """The two texts encoded for the model, the clean text's mask position, and the model's most likely tokens
    there for each text (best first): what the controls offer and the defaults of target and foil."""

    clean: EncodedText
    corrupted: EncodedText
    tokens: list[str]
    corrupted_tokens: list[str]
    mask: int
    clean_top: list[str]
    corrupted_top: list[str]


def token_id(tokenizer: Any, token: str, role: str) -> int:
    """The vocabulary id of `token` (an entry as written, or a word the tokenizer reads as one entry); anything else
    is a one-line error naming what the tokenizer makes of it."""
    unk, unk_token = getattr(tokenizer, "unk_token_id", None), getattr(tokenizer, "unk_token", None)
    for candidate in (token, *_single(tokenizer.tokenize(token))):
        found = tokenizer.convert_tokens_to_ids(candidate)
        if isinstance(found, int) and (found != unk or candidate == unk_token):
            return found
    pieces = tokenizer.tokenize(token)
    reads = f"the tokenizer reads it as {len(pieces)}: {' '.join(pieces)}" if pieces else "it is empty"
    raise ValueError(f"the {role} {token!r} is not one token of the vocabulary ({reads}); choose one token.")


def _single(pieces: list[str]) -> list[str]:
    return pieces if len(pieces) == 1 else []


def mask_scores(model: torch.nn.Module, output: Any, mask: int) -> torch.Tensor:
    """The masked-LM logits (vocab,) at the mask of the batch's first row, in float32."""
    return split_heads(model, output)[0][0, mask].float()


def mask_metric(model: torch.nn.Module, metric: str, mask: int, target: int, foil: int) -> Callable[[Any], Any]:
    """The metric patch() reads from the model's output: logit[target] − logit[foil] ("logit difference") or the
    softmax probability of the target ("probability"), at the mask."""
    if metric == "logit difference":
        return lambda output: mask_scores(model, output, mask)[target] - mask_scores(model, output, mask)[foil]
    return lambda output: torch.softmax(mask_scores(model, output, mask), dim=-1)[target]


def differing(inputs: PatchingInputs) -> list[int]:
    """Positions where the corrupted text has another token than the clean one."""
    return [p for p, (a, b) in enumerate(zip(inputs.tokens, inputs.corrupted_tokens)) if a != b]


def _slug(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "-", text).strip("-").lower()[:24] or "text"


class PatchingPanel(Panel):
    """Activation patching between a clean and a corrupted text, at the clean text's first mask token.

    Controls: the target token (default: the model's top prediction at the mask for the clean text), the foil
    (default: its top prediction for the corrupted text, or the next one where that is the target), the metric
    (`"logit difference"`: logit[target] − logit[foil]; `"probability"`: softmax probability of the target) and the
    point patched (`"hidden"`, `"attn_out"`, `"mlp_out"`: layer × token map; `"head_out"`: layer × head grid).
    `result` is the PatchResult drawn, `view` the CellGridView that shows it. Bad input (no mask token, texts of
    different lengths, a target that is not one token, a model without a masked-LM head) is one line in the panel.

    `on_open(callback)`: a cell opened (clicked, or Enter on it) calls `callback(layer, head, position)`:
    `(layer, None, position)` in the layer × token map, `(layer, head, None)` in the head grid; layers count from 0,
    as the hook points do (layer l is the output of encoder layer l).
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any, clean: str = CLEAN, corrupted: str = CORRUPTED,
                 target: str | None = None, foil: str | None = None, metric: str = "logit difference",
                 point: str = "hidden") -> None:
        _check_choice("metric", metric, METRICS)
        _check_choice("point", point, tuple(POINT_LABELS))
        check_texts(clean, corrupted)
        self.model, self.tokenizer = model, tokenizer
        self.clean, self.corrupted = clean, corrupted
        self.result: PatchResult | None = None
        self.inputs: PatchingInputs | None = None
        self.error = ""  # the one line shown instead of the figure
        self.selected: tuple[int, int] | None = None  # the cell last opened (row, column of the figure)
        self.redraws = 0  # figures computed: set() and a hold() block make one
        self._target, self._foil = target or None, foil or None  # None: the model's top prediction
        self._holding, self._dirty = Hold(), False  # inside hold(): changes are kept for one run at its end
        self._quietly = Hold()  # open while the panel sets its own controls: no reader chose them
        self._open_listeners: list[Opened] = []
        self.target_box = lean(widgets.Combobox, description="target", placeholder="top prediction",
                               continuous_update=False, ensure_option=False, style=LABEL_STYLE,
                               layout={"width": "210px"})
        self.foil_box = lean(widgets.Combobox, description="foil", placeholder="top prediction",
                             continuous_update=False, ensure_option=False, style=LABEL_STYLE,
                             layout={"width": "190px"})
        self.metric_toggle = toggle_buttons(list(METRICS), metric, list(METRIC_TIPS), label="metric")
        self.point_toggle = toggle_buttons([(label, key) for key, label in POINT_LABELS.items()], point,
                                           [POINT_TIPS[key] for key in POINT_LABELS], label="patch")
        self.target_box.observe(lambda change: self._typed("target", change["new"]), names="value")
        self.foil_box.observe(lambda change: self._typed("foil", change["new"]), names="value")
        for toggle in (self.metric_toggle, self.point_toggle):
            toggle.observe(lambda _: self._changed(), names="value")
        self.view = CellGridView(label="activation patching")
        self.view.on_open(self._cell_opened)
        self.export_bar = ExportBar(self, "patching")
        super().__init__([toolbar(self.target_box, self.foil_box, self.metric_toggle, self.point_toggle),
                          self.view, self.export_bar])
        self.refresh()

    # what the workbench and users call ---------------------------------------------------------------------
    @property
    def metric(self) -> str:
        """The metric patched: "logit difference" or "probability"."""
        return str(self.metric_toggle.value)

    @property
    def point(self) -> str:
        """The point patched: "hidden", "attn_out", "mlp_out" or "head_out"."""
        return str(self.point_toggle.value)

    @property
    def target(self) -> str | None:
        """The target token in use (the model's top prediction unless one was chosen); None before a run."""
        return self.target_box.value or None

    @property
    def foil(self) -> str | None:
        """The foil token in use (see the class docstring); None before a run."""
        return self.foil_box.value or None

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Change several things (controls, texts, the model) and compute and draw once, when the block ends."""
        try:
            with self._holding():
                yield
        finally:
            if not self._holding and self._dirty:
                self.refresh()

    def set(self, target: str | None = _UNSET, foil: str | None = _UNSET, metric: str = _UNSET,
            point: str = _UNSET) -> None:
        """Set any of the controls at once and redraw once; target or foil None goes back to the model's top
        prediction."""
        if metric is not _UNSET:
            _check_choice("metric", metric, METRICS)
        if point is not _UNSET:
            _check_choice("point", point, tuple(POINT_LABELS))
        with self.hold():
            if target is not _UNSET:
                self._target = target or None
            if foil is not _UNSET:
                self._foil = foil or None
            with self._quietly():
                if metric is not _UNSET:
                    self.metric_toggle.value = metric
                if point is not _UNSET:
                    self.point_toggle.value = point
            self._dirty = True

    def set_texts(self, clean: str, corrupted: str) -> None:
        """Patch between two other texts (same model, same chosen tokens) and redraw."""
        check_texts(clean, corrupted)
        self.clean, self.corrupted, self.inputs = clean, corrupted, None
        self._changed()

    def set_model(self, model: torch.nn.Module, tokenizer: Any) -> None:
        """Patch another model on the same texts (chosen tokens kept; a token not in its vocabulary is a line)."""
        self.model, self.tokenizer, self.inputs = model, tokenizer, None
        self._changed()

    def on_open(self, callback: Opened) -> None:
        """Call `callback(layer, head, position)` when a cell is opened: (layer, None, position) in the layer ×
        token map, (layer, head, None) in the head grid, so the attention panel can show what that cell reads."""
        self._open_listeners.append(callback)

    def to_svg(self) -> str:
        """The figure on screen (the view's very drawing); with only a line on screen, a ValueError saying it."""
        if not self.view.svg:
            raise ValueError(self.error or "nothing is drawn yet")
        return self.view.to_svg()

    def static_html(self) -> str:
        """The figure, or the one line shown instead of it."""
        return super().static_html() if self.view.svg else f"<div class='bvl-figure'>{error_html(self.error)}</div>"

    def caption_parts(self) -> tuple[str, str | None, str | None]:
        """(model name, clean text, corrupted text) for an export's caption."""
        return model_name(self.model), self.clean, self.corrupted

    def release(self) -> None:
        """Drop the patching result and the encoded texts."""
        self.result, self.inputs = None, None

    # computing and drawing ---------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Run patch() for the texts and controls as they are and draw the figure, or the line that says why not."""
        self._dirty, self.result, self.selected = False, None, None
        self.redraws += 1
        try:
            inputs = self.inputs = self.inputs or self._encode()
            target, foil = self._chosen_tokens(inputs)
            metric = mask_metric(self.model, self.metric, inputs.mask, token_id(self.tokenizer, target, "target"),
                                 token_id(self.tokenizer, foil, "foil"))
            seq = inputs.clean.inputs["input_ids"].shape[-1]
            with evaluating(self.model), threads_for(self.model, seq * seq):
                self.result = patch(self.model, inputs.clean.inputs, inputs.corrupted.inputs, metric, self.point)
        except ValueError as error:
            self._show_error(str(error))
            return
        if self.result.clean == self.result.corrupted:
            self._show_error(f"clean and corrupted give the same {self.metric} ({exact(self.result.clean)}): "
                             "there is nothing to restore; choose a target and foil (or texts) the model tells apart.")
            return
        self.draw()

    def draw(self) -> None:
        """Draw the result held (no model run): the layer × token map, or the layer × head grid for head_out."""
        result, inputs = self.result, self.inputs
        if result is None or inputs is None:
            return
        note = self.metric_line()
        effect, normalized = result.effect.numpy(), result.normalized.numpy()
        title = f"activation patching · {POINT_TITLES[result.point]}"
        if result.point == "head_out":
            svg = head_grid_svg(normalized, title, note, self.selected, effect=effect, clean=result.clean,
                                corrupted=result.corrupted)
        else:
            svg = patching_svg(normalized, inputs.tokens, None, title, note, result.point, self.selected,
                               corrupted_tokens=inputs.corrupted_tokens, effect=effect, clean=result.clean,
                               corrupted=result.corrupted)
        self.error = ""
        self.view.show(svg, title, self.selected)
        self.export_bar.name = self.export_name()
        self.figure_changed()

    def metric_line(self) -> str:
        """What the figure is measured against: the metric, the tokens, and its clean and corrupted values."""
        if self.result is None or self.inputs is None:
            return ""
        what = (f"logit difference {self.target} − {self.foil}" if self.metric == "logit difference"
                else f"probability of {self.target}")
        return (f"{what} at position {self.inputs.mask}: clean {exact(self.result.clean)}, "
                f"corrupted {exact(self.result.corrupted)} (1 restores the clean value)")

    def export_name(self) -> str:
        """'patching-hidden-france-vs-italy': the point and the words where the texts differ (or their starts)."""
        inputs = self.inputs
        where = differing(inputs)[:3] if inputs is not None else []
        clean = "-".join(inputs.tokens[p] for p in where) if inputs is not None and where else self.clean
        corrupted = "-".join(inputs.corrupted_tokens[p] for p in where) if inputs is not None and where \
            else self.corrupted
        return f"patching-{self.point}-{_slug(clean)}-vs-{_slug(corrupted)}"

    # inside ------------------------------------------------------------------------------------------------
    def _encode(self) -> PatchingInputs:
        """Encode both texts, find the mask, and read the model's top predictions there (one forward each)."""
        mlm_head(self.model, "activation patching at the mask")
        mask_token = getattr(self.tokenizer, "mask_token", None) or "[MASK]"
        clean = encode_text(self.model, self.tokenizer, self.clean)
        if not self.corrupted.strip():
            raise ValueError("no corrupted text yet: give the clean text with one fact changed (as many tokens), "
                             "e.g. another city for a capital.")
        corrupted = encode_text(self.model, self.tokenizer, self.corrupted)
        clean_ids = clean.inputs["input_ids"][0].tolist()
        corrupted_ids = corrupted.inputs["input_ids"][0].tolist()
        if len(clean_ids) != len(corrupted_ids):
            raise ValueError(f"clean and corrupted must be the same length in tokens: clean has {len(clean_ids)}, "
                             f"corrupted {len(corrupted_ids)}; change words for words that tokenize alike.")
        mask_id = getattr(self.tokenizer, "mask_token_id", None)
        if mask_id not in clean_ids:
            raise ValueError(f"the clean text has no {mask_token}: put one where the answer goes "
                             f"(e.g. “The capital of France is {mask_token}.”).")
        mask = clean_ids.index(mask_id)
        convert = self.tokenizer.convert_ids_to_tokens
        with evaluating(self.model), threads_for(self.model, len(clean_ids)), torch.no_grad():
            tops = [mask_scores(self.model, self.model(**encoded.inputs), mask).topk(TOP_OPTIONS).indices.tolist()
                    for encoded in (clean, corrupted)]
        return PatchingInputs(clean, corrupted, list(convert(clean_ids)), list(convert(corrupted_ids)), mask,
                              list(convert(tops[0])), list(convert(tops[1])))

    def _chosen_tokens(self, inputs: PatchingInputs) -> tuple[str, str]:
        """(target, foil): the ones chosen, else the defaults; the boxes show them and offer the top predictions."""
        target = self._target or inputs.clean_top[0]
        foil = self._foil or next((t for t in inputs.corrupted_top if t != target), inputs.corrupted_top[0])
        with self._quietly():
            self.target_box.options, self.foil_box.options = tuple(inputs.clean_top), tuple(inputs.corrupted_top)
            self.target_box.value, self.foil_box.value = target, foil
        return target, foil

    def _show_error(self, message: str) -> None:
        self.error = message
        self.view.clear(message)  # in the view, as the other causal tools say it
        self.figure_changed()


    def _typed(self, which: str, value: str) -> None:
        if self._quietly:
            return
        setattr(self, f"_{which}", value.strip() or None)
        self._changed()

    def _changed(self) -> None:
        if self._quietly:
            return
        if self._holding:
            self._dirty = True
        else:
            self.refresh()

    def _cell_opened(self, row: int, col: int) -> None:
        if self.result is None:
            return
        self.selected = (row, col)
        self.draw()
        layer, head, position = (row, col, None) if self.result.point == "head_out" else (row, None, col)
        for callback in list(self._open_listeners):
            callback(layer, head, position)


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}.")
