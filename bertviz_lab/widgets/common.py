"""What every panel shares: escaping, token chips, the palette, and a static HTML fallback in the mimebundle."""

from __future__ import annotations

import contextlib
import html
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import ipywidgets as widgets

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
# The plotly template of every figure: layout only. Plotly's default template also styles each of its ~50 trace
# types, which makes a first FigureWidget take ~0.3 s longer to build and its state ~7 KB larger.
_AXIS = {"gridcolor": "#e6e9ef", "linecolor": "#c8ccd4", "zerolinecolor": "#c8ccd4", "automargin": True,
         "title": {"standoff": 8}}
PLOT_TEMPLATE = {"layout": {"font": {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 12,
                                     "color": "#2a3f5f"},
                            "paper_bgcolor": "white", "plot_bgcolor": "white", "colorway": HEAD_COLORS,
                            "hoverlabel": {"align": "left"}, "xaxis": _AXIS, "yaxis": _AXIS}}


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
    return f"<table class='{css_class}' style='border-collapse:collapse'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class Panel(widgets.VBox):
    """A VBox whose mimebundle also carries a static HTML rendering, shown where no kernel is running, and whose
    figure on screen can be saved for a paper."""

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document: vector, text as (escaped) text, title and colour bar."""
        raise NotImplementedError

    def static_html(self) -> str:
        """Self-contained HTML of the panel's current state (no scripts, no network)."""
        return f"<div class='bvl-static'>{self.to_svg()}</div>"

    def figure_changed(self) -> None:
        """Called by a panel after the figure on screen changed, so its static copy follows the live view."""

    def save(self, path: str | Path, scale: float = 1) -> Path:
        """Write the figure on screen to `path`: SVG or PNG by its suffix, `scale` times the size on screen."""
        from bertviz_lab.widgets.export import save_figure

        return save_figure(self.to_svg(), path, scale)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/html"] = self.static_html()
        return bundle


def encode_text(model: Any, tokenizer: Any, text: str, text_b: str | None = None) -> tuple[dict, dict]:
    """Tokenize a text (pair) for `model`: (the full encoding, the model's inputs on its device)."""
    if not text or not text.strip():
        raise ValueError("the text to inspect is empty.")
    max_length = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    encoded = tokenizer.encode_pretraining_inputs(text, text_b or None, max_length=max_length)
    device = next(model.parameters()).device
    return encoded, {k: encoded[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids")}


@contextlib.contextmanager
def evaluating(model: Any) -> Iterator[None]:
    """Eval mode (no dropout) for the block, then the model's previous mode again."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
