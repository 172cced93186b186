"""LogitLensPanel: what the model would predict at one position if it stopped after each layer (the logit lens), the
k most likely tokens per layer, and one token followed through the layers.

The model runs once per text and model: the LogitLens (every layer's vocabulary logits at every position) is kept,
and choosing another position, another k or another token to follow only reads it again.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import torch

from bertviz_lab.model.encoding import EncodedText, check_texts, encode_text
from bertviz_lab.trace.logit_lens import LogitLens, logit_lens, mlm_head
from bertviz_lab.widgets.figures.logit_lens import TrackedToken, logit_lens_svg
from bertviz_lab.widgets.panels.controls import LABEL_STYLE, Hold, lean, toolbar
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.panel import Panel, error_html
from bertviz_lab.widgets.panels.running import evaluating, threads_for
from bertviz_lab.widgets.views.cell_grid import CellGridView

DEFAULT_TEXT = "The capital of France is [MASK]."
MAX_K = 10
NOTE = "each layer's residual stream read through the model's own masked-LM head · colour: probability"


def default_position(encoding: Any, mask_id: int | None) -> int:
    """Where the lens looks first: the first mask token (what the model is asked to fill in), else the last token
    that is not a special one."""
    ids = encoding["input_ids"][0].tolist()
    if mask_id is not None and mask_id in ids:
        return ids.index(mask_id)
    special = encoding["special_tokens_mask"][0].tolist()
    plain = [i for i, s in enumerate(special) if not s]
    return plain[-1] if plain else len(ids) - 1


def vocabulary_token(tokenizer: Any, text: str) -> tuple[str, int]:
    """(token, id) of what the user typed to follow: the vocabulary entry itself ("paris", "ĠParis", "##ing"), else
    the one token the word reads as (with a space before it for byte-level vocabularies); a one-line ValueError
    where it is none or several."""
    word = text.strip()
    unk = getattr(tokenizer, "unk_token", None)
    found = tokenizer.convert_tokens_to_ids(word)
    if isinstance(found, int) and (found != getattr(tokenizer, "unk_token_id", None) or word == unk):
        return word, found
    pieces: list[str] = []
    for candidate in (word, " " + word):
        pieces = list(tokenizer.tokenize(candidate))
        if len(pieces) == 1 and pieces[0] != unk:
            return pieces[0], int(tokenizer.convert_tokens_to_ids(pieces[0]))
    reads = f"it reads as {len(pieces)} tokens ({' '.join(pieces)})" if len(pieces) > 1 else "it is unknown"
    raise ValueError(f"{word!r} is not a token of the model's vocabulary: {reads}; follow one token.")


def tracked_token(lens: LogitLens, position: int, token: str, token_id: int) -> TrackedToken:
    """One token's probability, rank and logit after every layer at `position`, from the same softmax as
    LogitLens.top (so a followed token's probability equals its cell's)."""
    logits = lens.logits[:, position].float()
    probs = torch.softmax(logits, dim=-1)
    chosen = probs[:, token_id]
    ranks = (probs > chosen[:, None]).sum(dim=-1) + 1
    return TrackedToken(token, int(token_id), chosen.tolist(), [int(r) for r in ranks.tolist()],
                        logits[:, token_id].tolist())


class LogitLensPanel(Panel):
    """A position of the text (a dropdown of its tokens), how many ranks to show and a token to follow; the figure
    is the logit lens there, one row per layer. Clicking a cell follows that cell's token through the layers."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, text: str = DEFAULT_TEXT, position: int | None = None,
                 k: int = 5, track: str = "") -> None:
        check_texts(text)
        _check_k(k)
        self.model, self.tokenizer, self.text = model, tokenizer, text
        self._lens: LogitLens | None = None
        self._encoded: EncodedText | None = None
        self._tokens: list[str] = []
        self._selected: tuple[int, int] | None = None
        self._problem = ""  # why there is no figure (no MLM head, a text too long), "" when there is one
        self._held = Hold()  # open while the panel sets its own controls
        self.position = lean(widgets.Dropdown, options=[], description="position", style=LABEL_STYLE,
                             layout={"width": "auto"})
        self.k = lean(widgets.IntSlider, value=k, min=1, max=MAX_K, description="top k", style=LABEL_STYLE,
                      layout={"width": "220px"})
        self.track = lean(widgets.Text, value=track, placeholder="a token to follow", description="follow",
                          style=LABEL_STYLE, layout={"width": "220px"})
        self.error = lean(widgets.HTML)
        self.view = CellGridView(label="logit lens")
        self.export = ExportBar(self, "logit-lens")
        for control in (self.position, self.k, self.track):
            control.observe(lambda _: self._control_changed(), names="value")
        self.view.on_open(self._cell_opened)
        super().__init__([toolbar(self.position, self.k, self.track), self.export, self.error, self.view])
        self._read(position)
        self.redraw()

    # inputs ---------------------------------------------------------------------------------------------------
    @property
    def lens(self) -> LogitLens | None:
        """The logit lens of the text (every layer, every position), None where the model could not give one."""
        return self._lens

    def set_text(self, text: str) -> None:
        """Run the model on a new text (the position goes back to its first mask token) and redraw."""
        check_texts(text)
        self.text = text
        self._read(None)
        self.redraw()

    def set_model(self, model: torch.nn.Module, tokenizer: Any) -> None:
        """Read the same text with another model (and its tokenizer) and redraw; the position is kept where the
        tokens are the same."""
        old_tokens, old_position = self._tokens, self.position.value
        self.model, self.tokenizer = model, tokenizer
        self._read(None)
        if self._tokens and self._tokens == old_tokens and old_position is not None:
            with self._held():
                self.position.value = old_position
        self.redraw()

    def set(self, position: int | None = None, k: int | None = None, track: str | None = None) -> None:
        """Change any of the position, k and the followed token (None keeps it) with one redraw."""
        if k is not None:
            _check_k(k)
        if position is not None and (isinstance(position, bool) or position not in range(len(self._tokens))):
            raise ValueError(f"position must be an int in 0..{len(self._tokens) - 1}, got {position!r}.")
        with self._held():
            if position is not None:
                self.position.value = position
            if k is not None:
                self.k.value = k
            if track is not None:
                self.track.value = track
            self._selected = None
        self.redraw()

    def _read(self, position: int | None) -> None:
        """Encode the text and run the lens once (the only forward pass the panel makes for it); a model without an
        MLM head or a text too long leaves no lens and says why."""
        self._lens, self._encoded, self._tokens, self._problem, self._selected = None, None, [], "", None
        try:
            mlm_head(self.model)
            encoded = encode_text(self.model, self.tokenizer, self.text, truncate=False)
        except ValueError as error:
            self._problem = str(error)
            with self._held():
                self.position.options = []
            return
        ids = encoded.inputs["input_ids"]
        with evaluating(self.model), threads_for(self.model, ids.shape[-1], ids.device):
            self._lens = logit_lens(self.model, encoded.inputs, tokenizer=self.tokenizer)
        self._encoded = encoded
        self._tokens = list(self.tokenizer.convert_ids_to_tokens(ids[0].tolist()))
        if position is None:
            position = default_position(encoded.encoding, getattr(self.tokenizer, "mask_token_id", None))
        elif isinstance(position, bool) or position not in range(len(self._tokens)):
            raise ValueError(f"position must be an int in 0..{len(self._tokens) - 1}, got {position!r}.")
        with self._held():
            self.position.options = [(f"{i} · {token}", i) for i, token in enumerate(self._tokens)]
            self.position.value = position

    # drawing --------------------------------------------------------------------------------------------------

    def _control_changed(self) -> None:
        if not self._held:
            self._selected = None
            self.redraw()

    def _cell_opened(self, row: int, col: int) -> None:
        """Follow the clicked cell's token through the layers: the natural next question about a candidate."""
        if self._lens is None or self.position.value is None or col >= self.k.value:
            return
        rows = self._lens.top(self.position.value, self.k.value)
        if 0 <= row < len(rows):
            tokens = rows[row].tokens or [str(i) for i in rows[row].ids]
            with self._held():
                self.track.value = tokens[col]
            self._selected = (row, col)
            self.redraw()

    def redraw(self) -> None:
        """Draw the lens at the chosen position (no forward pass: the kept LogitLens is read), or the one line that
        says why there is none."""
        self.error.value = ""
        if self._lens is None:
            self.view.clear(self._problem)
            self.figure_changed()
            return
        position, k = int(self.position.value), int(self.k.value)
        rows = self._lens.top(position, k)
        at = self._lens.logits[:, position]
        logits = [at[row.layer, row.ids].float().tolist() for row in rows]
        track = None
        if self.track.value.strip():
            try:
                token, token_id = vocabulary_token(self.tokenizer, self.track.value)
                track = tracked_token(self._lens, position, token, token_id)
            except ValueError as error:
                self.error.value = error_html(error)
        ids = self._lens.input_ids
        mask_id = getattr(self.tokenizer, "mask_token_id", None)
        actual = self._tokens[position] if ids is not None and int(ids[position]) != mask_id else None
        svg = logit_lens_svg(rows, position, self._tokens[position], note=NOTE, selected=self._selected,
                             actual=actual, logits=logits, track=track)
        title = f"logit lens · position {position} · {self._tokens[position]}"
        self.view.show(svg, title, self._selected)
        self.figure_changed()

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document; a ValueError (its one line) where there is none."""
        if not self.view.svg:
            raise ValueError(f"no logit lens to export: {self.view.message or 'nothing drawn yet'}")
        return self.view.to_svg()

    def static_html(self) -> str:
        """The figure on screen as self-contained HTML, or the line that says why there is none."""
        if not self.view.svg:
            return f"<div class='bvl-figure'>{error_html(self.view.message)}</div>"
        return f"<div class='bvl-figure bvl-logit-lens'>{self.to_svg()}</div>"

    def release(self) -> None:
        """Drop the lens (layers x positions x vocabulary logits: the panel's one large tensor) and the batch."""
        self._lens, self._encoded = None, None


def _check_k(k: Any) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValueError(f"k must be an int in 1..{MAX_K}, got {k!r}.")
