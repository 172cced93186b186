"""What an attention view's glue is, and what it reads: the `AttentionView` every view of the attention panel's
switcher implements (made on first show, drawn from the state, named for export), and the `AttentionSource` it reads
that state from.

Two panels feed the same glue: the AttentionPanel (a traced model: its source reads the trace and the panel's
controls) and the AttentionMapsPanel of `bertviz_lab.views` (static attention tensors: its source reads an
AttentionSet). A view's title, note and drawing are written once, here and in the view's module; a source only says
what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ContextManager, Protocol, Sequence

import ipywidgets as widgets
import numpy as np
import torch

from bertviz_lab.widgets import registry


@dataclass(frozen=True)
class Axes:
    """The rows (query tokens) and columns (key tokens) a view draws: their positions in the input, their text, and
    which are [CLS]/[SEP]."""

    queries: np.ndarray  # int positions
    keys: np.ndarray
    query_tokens: list[str]
    key_tokens: list[str]
    query_special: np.ndarray  # bool, one per row
    key_special: np.ndarray  # bool, one per column


class AttentionSource(Protocol):
    """What a view reads: the controls' values, the attention at the chosen layer, the tokens; and the two calls a
    view's glue makes when a reader acts in its widget (`moved`, `open`: the panel's whole API for the views).

    Every source has the members down to `open`; the others belong to the views that use them (the neuron view's
    q and k, the saliency view's text, the model view's ablation) and exist where those views are offered.
    """

    label: str  # the attention's name at the head of a title ("" for a model's own, "cross attention", ...)
    export_prefix: str  # the first word of an export's file name ("attention", "cross-attention", ...)
    controls: tuple[str, ...]  # the controls the source offers: a title names only choices a reader made
    same_tokens: bool  # rows and columns are the same tokens (one input's self attention)
    has_special: bool  # the input has [CLS]/[SEP] (a title says they are clipped only then)
    export_window: list[int] | None  # save(window=...)'s heatmap window while a save runs, else None
    cut_note: str | None  # what a cut text lost (the truncation notice), the last note of a view
    layer: int
    head: int
    heads: list[int]  # the heads the head view shows
    num_heads: int
    aggregation: str  # "head", "mean" or "rollout"
    direction: str  # "all", "A→B" or "B→A"
    scale: str  # "linear", "row" or "log"
    special: str  # [CLS]/[SEP]: "show", "clip" or "hide"
    query: int | None  # the query token's position (None: no query chosen)
    head_view_k: int  # lines per query in the head view
    views: tuple[str, ...]  # the views the panel offers (the head view opens the neuron view only where there is one)
    quiet: bool  # inside quietly(): a change in a widget is the panel's, not a reader's

    def axes(self) -> Axes:
        """The rows and columns of the heatmap and the head view (the sentence-pair direction applied)."""

    def whole_axes(self) -> Axes:
        """The rows and columns of every thumbnail of the model view (no direction)."""

    def weights(self, axes: Axes) -> np.ndarray:
        """The heatmap's (rows, columns) weights: one head, the mean of heads or rollout, as `aggregation` says."""

    def layer_maps(self, axes: Axes) -> torch.Tensor:
        """Every head's (heads, rows, columns) weights at the chosen layer."""

    def model_maps(self, axes: Axes) -> Sequence[torch.Tensor]:
        """Every layer's (heads shown, rows, columns) weights, with heads off where an ablation is on; may be lazy."""

    def sides(self, axes: Axes) -> str:
        """What a thumbnail's rows and columns are (the model view's hint)."""

    def reading_notes(self) -> list[str]:
        """How to read the heatmap's rows and columns, before the notes its choices add (may be empty)."""

    def quietly(self) -> ContextManager[None]:
        """A block in which a view's own changes (the model view marking its selected head) are not a reader's."""

    def query_positions(self) -> list[int]:
        """The positions a reader can make the query token (none where the source has no query)."""

    def moved(self, view: str, *, query: int | None = None, heads: list[int] | None = None) -> None:
        """A reader changed `view` in its widget (zoomed, scrolled, chose a cell or heads): the query token and the
        heads it reports are kept without a redraw, and where `view` is on screen its export's name and the static
        copy follow. A source keeps what it has controls for."""

    def open(self, view: str | None = None, **controls: Any) -> None:
        """Show `view` (None: the one on screen) with `controls` (layer=, head=, query=, aggregation=, the head
        view's heads=) set at once and drawn once; focus=True sends the keyboard into it. A source sets the controls
        it has and leaves the others."""


class PanelControls:
    """The controls both panels' sources read alike: the layer and head dropdowns, and how many of a query's keys
    the head view draws lines to."""

    panel: Any

    @property
    def layer(self) -> int:
        return int(self.panel.layer.value)

    @property
    def head(self) -> int:
        return int(self.panel.head.value)

    @property
    def head_view_k(self) -> int:
        return int(self.panel.head_view_k)


class AttentionView:
    """One view of the attention panel's switcher: its registry entry, and how it is made, drawn and named.

    `make` builds the view's widget the first time it is shown and wires it to its source; `draw` pushes the source's
    state into it (only what it shows); `export_name` names a saved figure. The defaults suit a view whose widget is
    the figure itself.
    """

    name: str = ""  # the registry name (registry.View.name)

    @property
    def entry(self) -> registry.View:
        """The view's registry line: label, controls, keys, --view name."""
        return registry.view(self.name, registry.ATTENTION)

    def make(self, source: Any) -> widgets.Widget:
        raise NotImplementedError

    def parts(self, source: Any, widget: widgets.Widget) -> list[widgets.Widget]:
        """What the view's slot holds (the widget; the model view puts its ablation row above it)."""
        return [widget]

    def draw(self, source: Any, widget: widgets.Widget) -> None:
        raise NotImplementedError

    def new_input(self, source: Any, widget: widgets.Widget, same_shape: bool) -> None:
        """The panel shows another input (same_shape: of a model with as many layers and heads), before it redraws."""

    def export_name(self, source: Any, widget: widgets.Widget) -> str:
        raise NotImplementedError

    def exports(self) -> bool:
        """Whether the panel's export button applies (the saliency view brings its own)."""
        return True

    def on_screen(self, source: Any, widget: widgets.Widget) -> widgets.Widget:
        """The widget that is the figure (what `panel.on_screen` gives)."""
        return widget

    def to_svg(self, source: Any, widget: widgets.Widget) -> str:
        return self.on_screen(source, widget).to_svg()

    def to_plotly(self, source: Any, widget: widgets.Widget) -> Any:
        return self.on_screen(source, widget).to_plotly()


def no_plotly(name: str) -> ValueError:
    """The error of to_plotly() on a view that has no plotly counterpart."""
    return ValueError(f"to_plotly() gives the heatmap, the head view, the model view or the saliency view; this "
                      f"panel shows the {name} (switch views, or save() its SVG).")


def joined(*parts: str, separator: str = " · ") -> str:
    """Title parts joined, the empty ones (a model's own attention has no label) left out."""
    return separator.join(part for part in parts if part)

