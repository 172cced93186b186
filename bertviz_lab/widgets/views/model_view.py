"""The model view in the browser: the drawing of figures.model_view (every layer × head as a thumbnail, with head
ablation marks), and the clicks that open a head or switch it off."""

from __future__ import annotations

from typing import Any, Sequence

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures import model_view as figure
from bertviz_lab.widgets.figures.model_view import badge_text  # noqa: F401 (re-exported)
from bertviz_lab.widgets.views.front_end import css, esm

CLICK_MODES = ("open", "ablate")


class ModelView(anywidget.AnyWidget):
    """Every layer × head as a thumbnail under one shared colour scale; clicking one sets `selected` = [layer, head].

    With `click_mode` "ablate" (or a shift-click in any mode) a click switches that head off or on again instead: the
    front end toggles it in `ablated`, and the panel runs the text again without those heads. `changes` then gives a
    badge per head (how far its attention moved) and `lines` what the model's predictions did. The browser gets the
    drawing (`svg`) and these three choices; the maps' codes stay in the kernel. The keyboard does the same whatever
    the click mode: the arrow keys move between thumbnails (one tab stop), Enter opens a head, Space switches it off
    or on, Escape switches every head on.
    """

    _esm = esm("model_view.js")
    _css = css("model_view")
    svg = traitlets.Unicode("").tag(sync=True)  # the figure: exactly what to_svg() returns
    selected = traitlets.List(traitlets.Int(), default_value=[0, 0]).tag(sync=True)
    # raised by one when the thumbnail opened (a click, or Enter) is the one already selected: `selected` does not
    # change then, and a panel watching it would not open anything
    opens = traitlets.Int(0).tag(sync=True)
    click_mode = traitlets.Unicode("open").tag(sync=True)  # open: a click opens the head; ablate: switches it off
    ablated = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)  # [[layer, head], ...] switched off
    # what is drawn, kept in the kernel (not sent): the panel and the tests read it
    num_layers = traitlets.Int(0)
    num_heads = traitlets.Int(0)
    size = traitlets.Int(1)
    cols = traitlets.Int(1)  # a thumbnail's columns: size too, unless a rectangular (cross attention) map was given
    thumbnails = traitlets.Bytes(b"")  # uint8 (layers, heads, size, size): weight = (code − zero_code) × scale
    scale = traitlets.Float(0.0)
    zero_code = traitlets.Int(0)  # the code of weight 0: 0, or 127 for differences (diverging)
    palette = traitlets.Bytes(D.PALETTE.tobytes())
    bar_ticks: traitlets.List[Any] = traitlets.List()
    bar_title = traitlets.Unicode("attention weight")
    title = traitlets.Unicode("")
    hint = traitlets.Unicode("")  # what a thumbnail's rows and columns are
    changes = traitlets.Bytes(b"")  # float32 (L, H): how far each head's attention moved, or empty
    badge_min = traitlets.Float(figure.BADGE_MIN)  # changes below this get no badge
    lines = traitlets.List(traitlets.Unicode())  # what the ablation did to the predictions
    layer_names = traitlets.List(traitlets.Int())  # the model's numbers of the layers drawn, where only some are
    head_names = traitlets.List(traitlets.Int())  # the same for heads ([] for 0..)

    @traitlets.validate("click_mode")
    def _known_mode(self, proposal: dict) -> str:
        if proposal["value"] not in CLICK_MODES:
            raise traitlets.TraitError(f"click_mode must be one of {CLICK_MODES}, got {proposal['value']!r}")
        return proposal["value"]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observe(lambda _: self._draw(), names=["selected", "badge_min"])

    def show(self, codes: np.ndarray, scale: float, zero_code: int, palette: np.ndarray,
             bar_ticks: Sequence[Sequence], bar_title: str, title: str, hint: str,
             changes: np.ndarray | None = None, lines: Sequence[str] = ()) -> None:
        """Draw every head's map: codes (L, H, s, s) with weight = (code − zero_code) × scale; changes (L, H) or None
        (no head off); lines: what the ablation did."""
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        if codes.ndim != 4:
            raise ValueError(f"codes must be (layers, heads, rows, cols), got shape {codes.shape}")
        self.num_layers, self.num_heads, self.size, self.cols = codes.shape
        self.thumbnails, self.scale, self.zero_code = codes.tobytes(), float(scale), int(zero_code)
        self.palette = np.ascontiguousarray(palette, dtype=np.uint8).tobytes()
        self.bar_ticks, self.bar_title = [list(t) for t in bar_ticks], bar_title
        self.title, self.hint, self.lines = title, hint, list(lines)
        self.changes = b"" if changes is None else np.ascontiguousarray(changes, dtype=np.float32).tobytes()
        self._draw()

    def codes(self) -> np.ndarray:
        """The thumbnails' palette codes, (L, H, s, s)."""
        shape = (self.num_layers, self.num_heads, self.size, self.cols)
        return np.frombuffer(self.thumbnails, dtype=np.uint8).reshape(shape)

    def decoded(self) -> np.ndarray:
        """Thumbnails as weights (L, H, s, s) (or changes, with zero_code 127); code 255 reads as the scale's top."""
        return (np.minimum(self.codes().astype(np.float64), D.TOP_CODE) - self.zero_code) * self.scale

    def to_plotly(self) -> Any:
        """The thumbnails as a plotly Figure: one small heatmap per layer and head holding the values drawn (the
        pooled weights, or the changes with heads off), under the drawing's one colour scale and colour bar title."""
        from bertviz_lab.widgets.figures.plotly_figures import model_view_figure

        if not self.num_layers:
            raise ValueError("the model view shows nothing yet: there is no figure to give to plotly.")
        layers = self.layer_names or list(range(self.num_layers))
        heads = self.head_names or list(range(self.num_heads))
        top = (D.TOP_CODE - self.zero_code) * self.scale or 1.0
        return model_view_figure(self.decoded(), layers, heads, self.zero_code != 0, top, self.title, self.hint,
                                 self.bar_title)

    def head_changes(self) -> np.ndarray | None:
        """The (L, H) changes the badges show, or None when no head is off."""
        if not self.changes:
            return None
        return np.frombuffer(self.changes, dtype=np.float32).reshape(self.num_layers, self.num_heads)

    def _draw(self) -> None:
        if not self.thumbnails:
            self.svg = ""
            return
        self.svg = figure.model_view_svg(self.codes(), np.frombuffer(self.palette, np.uint8).reshape(256, 3),
                                         self.bar_ticks, self.bar_title, self.title, self.hint, self.lines,
                                         self.ablated, self.head_changes(), self.badge_min, self.selected,
                                         self.layer_names, self.head_names)

    def to_svg(self) -> str:
        """The model view as a standalone SVG document: the same drawing the browser shows."""
        return self.svg
