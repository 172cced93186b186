"""What every panel is: a VBox with a static copy of its figure and save(); small escaped HTML pieces panels share."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import ipywidgets as widgets

from bertviz_lab.model.encoding import EncodedText, Truncation, encode_text, max_positions  # noqa: F401 (re-exported)
from bertviz_lab.widgets.figures.export import save_figure
from bertviz_lab.widgets.figures.palette import COLORS
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.views.front_end import all_css


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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_class("bvl-panel")  # how the panel's link finds the panel around it in the page

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
            from bertviz_lab.widgets.panels.static_copy import StaticCopy

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

    def close(self) -> None:
        """Close the live view and its static copy's link, so no pending update keeps the panel alive."""
        copy = self.__dict__.pop("_static_copy", None)
        if copy is not None:
            copy.close()
        super().close()

    def save(self, path: str | Path, scale: float = 1, theme: str = "light") -> Path:
        """Write the figure on screen to `path`: SVG or PNG by its suffix, `scale` times the size on screen, in the
        light or dark theme."""
        return save_figure(self.to_svg(), path, scale, theme, all_css())

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


