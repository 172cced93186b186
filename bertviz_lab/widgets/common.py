"""What every panel shares: escaping, token chips, the palette, and a static HTML fallback in the mimebundle."""

from __future__ import annotations

import contextlib
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import ipywidgets as widgets
import torch

# One colour per role, readable on light and dark themes.
COLORS = {
    "mask": "#d62728",
    "random": "#ff7f0e",
    "kept": "#2ca02c",
    "untouched": "#e8e8e8",
    "special": "#9e9e9e",
    "sentence_a": "#1f77b4",
    "sentence_b": "#9467bd",
}
HEAD_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"]


def escape(text: Any) -> str:
    """HTML-escape anything shown to a user (tokens and texts are user data)."""
    return html.escape(str(text), quote=True)


def chip(text: str, background: str, title: str = "", foreground: str = "#111", extra_style: str = "") -> str:
    """One token as an inline, escaped, coloured box."""
    return (f'<span class="bvl-chip" title="{escape(title)}" style="display:inline-block;margin:2px;padding:1px 5px;'
            f'border-radius:4px;font-family:monospace;background:{background};color:{foreground};{extra_style}">'
            f"{escape(text)}</span>")


def legend(items: Iterable[tuple[str, str]]) -> str:
    """A row of (label, colour) swatches."""
    return "".join(chip(label, color, foreground="#fff" if color not in (COLORS["untouched"],) else "#111")
                   for label, color in items)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], css_class: str = "bvl-table") -> str:
    """A small escaped HTML table."""
    head = "".join(f"<th style='text-align:left;padding:2px 8px'>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td style='padding:2px 8px'>{escape(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return (f"<table class='{css_class}' style='border-collapse:collapse'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


class Panel(widgets.VBox):
    """A VBox whose mimebundle also carries a static HTML rendering, shown where no kernel is running, and whose
    figure on screen can be saved for a paper."""

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document: vector, text as (escaped) text, title and colour bar."""
        raise NotImplementedError

    def static_html(self) -> str:
        """Self-contained HTML of the panel's current state (no scripts, no network)."""
        return f"<div class='bvl-figure'>{self.to_svg()}</div>"

    @property
    def static_copy(self):
        """The panel's StaticCopy (made on first use: panels set up their children before VBox.__init__)."""
        copy = self.__dict__.get("_static_copy")
        if copy is None:
            from bertviz_lab.widgets.static_copy import StaticCopy

            copy = self.__dict__["_static_copy"] = StaticCopy(self)
        return copy

    def figure_changed(self) -> None:
        """Called by a panel after the figure on screen changed, so its static copy follows the live view."""
        self.static_copy.changed()

    def on_figure_changed(self, callback: Callable[[], None]) -> None:
        """Call `callback` whenever this panel's figure changes (a Workbench keeps its own copy in step)."""
        self.static_copy.listeners.append(callback)

    def widget_bundle(self) -> dict[str, Any]:
        """The live view's own mimebundle, without the static HTML."""
        return super()._repr_mimebundle_()

    def _ipython_display_(self) -> None:
        self.static_copy.show()

    def save(self, path: str | Path, scale: float = 1) -> Path:
        """Write the figure on screen to `path`: SVG or PNG by its suffix, `scale` times the size on screen."""
        from bertviz_lab.widgets.export import save_figure

        return save_figure(self.to_svg(), path, scale)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/html"] = self.static_html()
        return bundle


UNLIMITED = 10**9  # "no limit" for the tokenizer: count every token of a long text before cutting it


@dataclass(frozen=True)
class Truncation:
    """How much of a text (pair) fits the model: panels show `notice` when a long text was cut to fit."""

    kept: int  # tokens the model reads, special tokens included
    total: int  # tokens of the whole text (pair), special tokens included
    limit: int | None  # the model's maximum number of positions
    kept_a: int = 0  # text tokens of sentence A kept / in all (special tokens not counted)
    total_a: int = 0
    kept_b: int | None = None  # the same for sentence B; None without one
    total_b: int | None = None

    @property
    def cut(self) -> bool:
        """True when tokens were dropped."""
        return self.kept < self.total

    @property
    def notice(self) -> str:
        """'kept 512 of 1,873 tokens (the model reads at most 512)', with each sentence of a pair; '' when whole."""
        if not self.cut:
            return ""
        text = f"kept {self.kept:,} of {self.total:,} tokens (the model reads at most {self.limit:,})"
        if self.kept_b is not None:
            text += (f": sentence A {self.kept_a:,} of {self.total_a:,}, sentence B {self.kept_b:,} of "
                     f"{self.total_b:,} (the longer one is cut first)")
        return text

    def notice_html(self) -> str:
        """The notice as a small escaped banner, '' when nothing was cut."""
        if not self.cut:
            return ""
        return ("<div class='bvl-truncation-notice' style='margin:4px 0;padding:2px 8px;border-left:3px solid #ff7f0e;"
                f"background:#fff6ea;color:#5a3a00'>{escape(self.notice)}</div>")


class EncodedText(tuple):
    """(encoding, model inputs) as before, plus `.truncation`: what a text longer than the model lost."""

    truncation: Truncation

    def __new__(cls, encoded: Any, inputs: dict, truncation: Truncation) -> "EncodedText":
        self = super().__new__(cls, (encoded, inputs))
        self.truncation = truncation
        return self


def max_positions(model: Any, tokenizer: Any) -> int | None:
    """How many tokens the model reads: its position embeddings, else the tokenizer's model_max_length."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None) if model is not None else None
    if limit is None:
        limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int) and 0 < limit < UNLIMITED else None


def _text_tokens(encoded: Any) -> tuple[int, int | None]:
    """Tokens of sentence A and of sentence B (None without one), special tokens not counted."""
    types = encoded["token_type_ids"][0]
    plain = encoded["special_tokens_mask"][0] == 0
    count_b = int(((types == 1) & plain).sum())
    return int(((types == 0) & plain).sum()), (count_b if bool((types == 1).any()) else None)


def encode_text(model: Any, tokenizer: Any, text: str, text_b: str | None = None) -> EncodedText:
    """Tokenize a text (pair) for `model`, cut to its positions (longest sentence first): (encoding, inputs).

    The result unpacks as before; its `.truncation` says how many tokens were kept of how many. model may be None
    (inputs on the CPU, the tokenizer's model_max_length as the limit).
    """
    if not text or not text.strip():
        raise ValueError("the text to inspect is empty.")
    text_b = text_b or None
    limit = max_positions(model, tokenizer)
    encoded = tokenizer.encode_pretraining_inputs(text, text_b, max_length=UNLIMITED)
    total = int(encoded["input_ids"].shape[1])
    total_a, total_b = _text_tokens(encoded)
    if limit is not None and total > limit:
        encoded = tokenizer.encode_pretraining_inputs(text, text_b, max_length=limit, truncation="longest_first")
    kept_a, kept_b = _text_tokens(encoded)
    truncation = Truncation(int(encoded["input_ids"].shape[1]), total, limit, kept_a, total_a, kept_b, total_b)
    device = next(model.parameters()).device if model is not None else torch.device("cpu")
    inputs = {k: encoded[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids")}
    return EncodedText(encoded, inputs, truncation)


@contextlib.contextmanager
def evaluating(model: Any) -> Iterator[None]:
    """Eval mode (no dropout) for the block, then the model's previous mode again."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
