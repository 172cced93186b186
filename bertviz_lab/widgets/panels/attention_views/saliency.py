"""The saliency view's glue: each token's share of a prediction, in a SaliencyPanel (its own toolbar and export)
made the first time the view is shown and handed the source's text when that changed since; a note says what it
needs where the source has no model or text."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from bertviz_lab.widgets import registry
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.attention_views.base import AttentionView, no_plotly
from bertviz_lab.widgets.panels.controls import lean
from bertviz_lab.widgets.panels.saliency import SaliencyPanel

SALIENCY_NEEDS = "the saliency view needs the model and the text: build the panel with model=, tokenizer= and text="


class SaliencyGlue(AttentionView):
    name = registry.SALIENCY

    def make(self, source: Any) -> widgets.HTML:
        """The note shown while there is no saliency panel (the widget the view keeps)."""
        note = lean(widgets.HTML)
        source.saliency_note = note
        return note

    def draw(self, source: Any, note: widgets.HTML) -> None:
        if source.saliency_inputs() is None:
            note.value = f"<span class='bvl-saliency-note bvl-muted'>{escape(SALIENCY_NEEDS)}</span>"
            return
        if source.saliency is None:
            model, tokenizer, text, text_b = source.saliency_inputs()
            source.saliency = SaliencyPanel(model, tokenizer, text, text_b)
            source.saliency.on_figure_changed(source.saliency_figure_changed)
            source.mount(self.name, [source.saliency])
        elif source.saliency_stale:
            if source.run is not None:
                source.saliency.show_run(source.run)
            else:
                source.saliency.set_text(*source.saliency_inputs()[2:])
        source.saliency_stale = False

    def export_name(self, source: Any, note: widgets.HTML) -> str:
        return source.saliency.export_bar.name if source.saliency is not None else "saliency"

    def exports(self) -> bool:
        return False

    def on_screen(self, source: Any, note: widgets.HTML) -> widgets.Widget:
        return source.saliency if source.saliency is not None else note

    def to_svg(self, source: Any, note: widgets.HTML) -> str:
        if source.saliency is None:
            return ('<svg xmlns="http://www.w3.org/2000/svg" class="bvl-fig bvl-saliency" width="640" height="40">'
                    f'<rect class="bvl-ground" width="100%" height="100%"/><text x="8" y="24">{escape(SALIENCY_NEEDS)}'
                    "</text></svg>")
        return source.saliency.to_svg()

    def to_plotly(self, source: Any, note: widgets.HTML) -> Any:
        if source.saliency is None:
            raise no_plotly(self.name)
        return source.saliency.to_plotly()


VIEW = SaliencyGlue()
