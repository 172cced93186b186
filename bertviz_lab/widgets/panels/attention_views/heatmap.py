"""The heatmap's glue: one head (or the mean of heads, or rollout) as a query × key matrix, titled with the choices
that made it."""

from __future__ import annotations

from functools import partial
from typing import Any, Sequence

from bertviz_lab.widgets import registry
from bertviz_lab.widgets.panels.attention_views.base import AttentionSource, AttentionView, joined
from bertviz_lab.widgets.panels.controls import lean
from bertviz_lab.widgets.views.heatmap import HeatmapView

SCALE_TITLES = {"linear": "linear scale", "row": "each row scaled to its max", "log": "log scale"}


def what(source: AttentionSource) -> str:
    """The heads behind the matrix, in words."""
    return {"head": f"head {source.head}", "mean": "mean of heads",
            "rollout": f"rollout through layers 0..{source.layer}"}[source.aggregation]


def titles(source: AttentionSource, any_special: bool) -> tuple[str, str]:
    """The heatmap's title (what is shown) and note (how to read it); any_special: the input has [CLS]/[SEP]."""
    direction, special = source.direction, source.special
    parts = [source.label, f"layer {source.layer}", what(source)]
    notes = list(source.reading_notes())
    if direction != "all":
        rows, columns = ("A", "B") if direction == "A→B" else ("B", "A")
        parts.append(direction)
        notes.append(f"sentence {rows}'s tokens attending to sentence {columns}'s: rows are a slice and do not sum "
                     "to 1")
    if "scale" in source.controls:
        parts.append(SCALE_TITLES[source.scale])
    if special == "clip" and any_special:
        parts.append("[CLS]/[SEP] clipped")
        notes.append("[CLS]/[SEP] are left out of the colour scale")
    elif special == "hide":
        parts.append("[CLS]/[SEP] hidden")
        if direction == "all":
            notes.append("rows leave [CLS]/[SEP] out and do not sum to 1")
    if source.cut_note:
        notes.append(source.cut_note)
    return joined(*parts), "; ".join(notes)


def check_window(window: Any, tokens: int) -> tuple[int, int]:
    """(start, end) of a window of token positions, checked: whole numbers, 0 <= start < end <= tokens."""
    try:
        start, end = (int(v) for v in window)
    except (TypeError, ValueError):
        raise TypeError(f"window must be (start, end), two token positions, got {window!r}.") from None
    if not 0 <= start < end <= tokens:
        raise ValueError(f"window {(start, end)} must have 0 <= start < end <= {tokens} (the tokens of this input).")
    return start, end



class Heatmap(AttentionView):
    name = registry.HEATMAP

    def make(self, source: Any) -> HeatmapView:
        view = lean(HeatmapView)
        view.observe(partial(self._moved, source), names=["window", "selected"])
        return view

    def _moved(self, source: Any, change: dict) -> None:
        """The window or the selected cell changed (in a front end, or here): the static copy and exports follow; a
        selected cell's query becomes the query token."""
        selected: Sequence[int] = change["new"] if change["name"] == "selected" else ()
        query = selected[0] if len(selected) == 2 and selected[0] in source.query_positions() else None
        source.moved(self.name, query=query)

    def draw(self, source: Any, view: HeatmapView) -> None:
        axes = source.axes()
        clip = source.special == "clip"
        title, note = titles(source, source.has_special)
        view.show(source.weights(axes), axes.query_tokens, axes.key_tokens, axes.queries, axes.keys, title, note,
                  mode=source.scale, ignore_rows=axes.query_special if clip else None,
                  ignore_cols=axes.key_special if clip else None)

    def export_name(self, source: Any, view: HeatmapView) -> str:
        heads = f"head{source.head}" if source.aggregation == "head" else source.aggregation
        window = view.window
        zoom = f"-queries{window[0]}-{window[1] - 1}-keys{window[2]}-{window[3] - 1}" if window else ""
        return f"{source.export_prefix}-layer{source.layer}-{heads}{zoom}"

    def to_svg(self, source: Any, view: HeatmapView) -> str:
        window = source.export_window  # save(window=...): those tokens drawn, whatever the window on screen
        return view.drawing(window)[0] if window else view.to_svg()


VIEW = Heatmap()
