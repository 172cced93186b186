"""What every panel shares: escaping, token chips, the palette, and a static HTML fallback in the mimebundle."""

from __future__ import annotations

import contextlib
import html
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import ipywidgets as widgets

from bertviz_lab.model.encoding import EncodedText, Truncation, encode_text, max_positions  # noqa: F401 (re-exported)

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


def notice_html(truncation: Truncation | None) -> str:
    """A truncation's notice as a small escaped banner, '' when nothing was cut (or nothing is known)."""
    if truncation is None or not truncation.cut:
        return ""
    return ("<div class='bvl-truncation-notice' style='margin:4px 0;padding:2px 8px;border-left:3px solid #ff7f0e;"
            f"background:#fff6ea;color:#5a3a00'>{escape(truncation.notice)}</div>")


_model_locks: "weakref.WeakKeyDictionary[Any, threading.RLock]" = weakref.WeakKeyDictionary()
_locks_lock = threading.Lock()


def model_lock(model: Any) -> threading.RLock:
    """One lock per model that every panel's run holds: a run on a worker thread (saliency) and the notebook's
    runs then never overlap, so no trace records another panel's forward and no run sees another's mode."""
    with _locks_lock:
        lock = _model_locks.get(model)
        if lock is None:
            lock = _model_locks[model] = threading.RLock()
        return lock


@contextlib.contextmanager
def evaluating(model: Any) -> Iterator[None]:
    """Eval mode (no dropout) for the block, then the model's previous mode again; the model's lock held."""
    with model_lock(model):
        was_training = model.training
        model.eval()
        try:
            yield
        finally:
            model.train(was_training)
