"""What every panel is: a VBox with a static copy of its figure and save(); small escaped HTML pieces panels share."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import ipywidgets as widgets

from bertviz_lab.model.encoding import EncodedText, Truncation, encode_text, max_positions  # noqa: F401 (re-exported)
from bertviz_lab.util.files import shown
from bertviz_lab.widgets.figures.caption import caption_line
from bertviz_lab.widgets.figures.export import save_figure
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels import shown_panels
from bertviz_lab.widgets.panels.controls import close_tree, forget_widgets
from bertviz_lab.widgets.panels.model_label import model_name
from bertviz_lab.widgets.views.front_end import all_css


def chip(text: str, kind: str, title: str = "", small: bool = False) -> str:
    """One token as an inline, escaped box; its colours, ink and outline come from the `bvl-<kind>` class
    (views/panels.css: the masking fates and the tags bvl-tag-0 to bvl-tag-15)."""
    size = " bvl-chip-small" if small else ""
    return f'<span class="bvl-chip bvl-{escape(kind)}{size}" title="{escape(title)}">{escape(text)}</span>'


def legend(items: Iterable[tuple[str, str]]) -> str:
    """A row of (label, kind) swatches, drawn as the chips of that kind are."""
    return "<div class='bvl-chip-legend'>" + "".join(chip(label, kind) for label, kind in items) + "</div>"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], css_class: str = "bvl-table") -> str:
    """A small escaped HTML table (class bvl-table: left-aligned, padded cells in the theme's colours)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    classes = "bvl-table" if css_class == "bvl-table" else f"bvl-table {escape(css_class)}"
    return f"<table class='{classes}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def error_html(error: Any) -> str:
    """An error message as an escaped span in the theme's error colour."""
    return f"<span class='bvl-error'>{escape(error)}</span>"


class Panel(widgets.VBox):
    """A VBox whose mimebundle also carries a static HTML rendering, shown where no kernel is running, and whose
    figure on screen can be saved for a paper."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # how the panel's link finds the panel around it in the page; given at creation, so no update follows
        kwargs["_dom_classes"] = (*kwargs.get("_dom_classes", ()), "bvl-panel")
        super().__init__(*args, **kwargs)

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

    def __repr__(self) -> str:
        """Its class name: ipywidgets' repr walks every child's traits on each display, and nobody reads it."""
        return f"{type(self).__name__}(...)"

    def widget_bundle(self) -> dict[str, Any]:
        """The live view's own mimebundle, without the static HTML."""
        return super()._repr_mimebundle_()

    def _ipython_display_(self) -> None:
        self.static_copy.show()
        shown_panels.shown(self)  # running the cell again closes this panel

    def close(self) -> None:
        """Give the panel's memory back: close its static copy's link and every widget it made (so ipywidgets holds
        none of them), let go of its data (`release`) and of those widgets; a closed panel shows nothing."""
        copy = self.__dict__.pop("_static_copy", None)
        if copy is not None:
            copy.close()
        close_tree(self)
        self.release()
        forget_widgets(self)
        super().close()

    def release(self) -> None:
        """Drop what the panel holds to draw (a trace, a run); called once it is closed."""

    def caption_parts(self) -> tuple[str, str | None, str | None]:
        """(model name, text, sentence B) the figure shows, for an export's caption: read from the panel's `model`,
        `text` and `text_b` where it has them ("" / None where not)."""
        model = getattr(self, "model", None)
        text, text_b = getattr(self, "text", None), getattr(self, "text_b", None)
        return (model_name(model) if model is not None else "", text if isinstance(text, str) else None,
                text_b if isinstance(text_b, str) else None)

    def caption(self, caption: bool | str = True) -> str:
        """The caption line an export carries: built from caption_parts() for True, `caption` itself for a string,
        "" for False."""
        if isinstance(caption, str):
            return caption
        if not isinstance(caption, bool):
            raise TypeError(f"caption must be True, False or a string, got {type(caption).__name__} {shown(caption)}.")
        return caption_line(*self.caption_parts()) if caption else ""

    def save(self, path: str | Path, scale: float = 1, theme: str = "light", caption: bool | str = False) -> Path:
        """Write the figure on screen to `path`: SVG or PNG by its suffix, `scale` times the size on screen, in the
        light or dark theme; `caption` adds a line under the figure naming the model and the text (True) or saying
        what it is given (a string)."""
        return save_figure(self.to_svg(), path, scale, theme, all_css(), self.caption(caption))

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/html"] = self.static_html()
        return bundle


def notice_html(truncation: Truncation | None) -> str:
    """A truncation's notice as a small escaped banner, '' when nothing was cut (or nothing is known)."""
    if truncation is None or not truncation.cut:
        return ""
    return f"<div class='bvl-notice bvl-truncation-notice'>{escape(truncation.notice)}</div>"


