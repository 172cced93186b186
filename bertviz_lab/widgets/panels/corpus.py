"""CorpusPanel: a corpus analysed by `bertviz_lab.corpus.analyze`, seen three ways — the head atlas (one statistic of
every head over the corpus, and a head's top texts), nearest contexts (exBERT's search: the corpus tokens whose hidden
state lies closest to a token's) and the query–key map (AttentionViz: one head's queries and keys in one 2-D
projection). Each view opens the text behind what was clicked in the attention panel, at that layer, head or token.

The panel reads the corpus only through its API (head_stats, top_texts, nearest, qk_map, text, tokens); each figure
is one drawing (figures/atlas.py, nearest.py, qk_map.py) that the live view, the static copy and exports share.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import ipywidgets as widgets
import torch

from bertviz_lab.kernels.head_statistics import STATISTICS
from bertviz_lab.model.encoding import encode_text
from bertviz_lab.widgets.figures.atlas import check_stat
from bertviz_lab.widgets.figures.caption import shortened
from bertviz_lab.widgets.figures.export import save_figure
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.controls import LABEL_STYLE, labelled, lean, toggle_buttons, toolbar
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.model_label import DEFAULT_MODEL_NAME
from bertviz_lab.widgets.panels.panel import Panel, error_html
from bertviz_lab.widgets.views.atlas import AtlasView
from bertviz_lab.widgets.views.front_end import all_css
from bertviz_lab.widgets.views.nearest import NearestView
from bertviz_lab.widgets.views.qk_map import QKMapView

VIEWS = ("atlas", "nearest", "qk map")
VIEW_NAMES = {"atlas": "head atlas", "nearest": "nearest contexts", "qk map": "query–key map"}
DEFAULT_QUERY = "She sat on the bank of the river."
CONTEXT_TOKENS = 4  # tokens each side of a q-k map point in its hover text
OpenText = Callable[[str, "str | None", "int | None", "int | None", "int | None"], None]


def open_corpus(corpus: Any, model: Any = None, tokenizer: Any = None) -> Any:
    """A Corpus, given one or the folder of one (Corpus.open says what is wrong with a folder that is not); the model
    and tokenizer given read the texts a search brings."""
    if isinstance(corpus, (str, Path)):
        from bertviz_lab.corpus import Corpus

        return Corpus.open(corpus, model=model, tokenizer=tokenizer)
    if not all(hasattr(corpus, name) for name in ("head_stats", "top_texts", "nearest", "qk_map", "text")):
        raise TypeError(f"corpus must be a bertviz_lab.corpus.Corpus or the folder of one, got "
                        f"{type(corpus).__name__}.")
    return corpus


def in_context(tokens: list[str], position: int, width: int = CONTEXT_TOKENS) -> str:
    """"… the river [bank] was flooded …": a token with up to `width` tokens each side."""
    left = tokens[max(0, position - width): position]
    right = tokens[position + 1: position + 1 + width]
    token = tokens[position] if 0 <= position < len(tokens) else "?"
    return " ".join((["…"] if position - width > 0 else []) + left + [f"[{token}]"] + right
                    + (["…"] if position + 1 + width < len(tokens) else []))


def longest_word(tokens: list[str]) -> int:
    """The position of the longest whole word among `tokens` (the first of equals): what a search starts from."""
    words = [(len(t), -i) for i, t in enumerate(tokens) if t.isalpha() and not t.startswith("[")]
    return -max(words)[1] if words else min(1, len(tokens) - 1)


class CorpusPanel(Panel):
    """The head atlas, nearest contexts and the query–key map of one analysed corpus, with their toolbars and an
    export button; a text opened from any of them shows in the attention panel (the panel's own, under the views, or
    the one `on_open` leads to: a Workbench's Attention tab).

    corpus: a Corpus or its folder; model, tokenizer: what reads a search's text and the opened texts (default: the
    pretrained model the workbench opens with); view: "atlas", "nearest" or "qk map"; stat: the atlas's statistic;
    layer, head: the q-k map's head (default: the first one the corpus stored); query, position, search_layer: the
    nearest-context search; k: matches and top texts; n: tokens sampled for the q-k map.
    """

    def __init__(self, corpus: Any, model: torch.nn.Module | None = None, tokenizer: Any = None, *,
                 view: str = "atlas", stat: str = "entropy", layer: int | None = None, head: int | None = None,
                 query: str = DEFAULT_QUERY, position: int | None = None, search_layer: int | None = None,
                 k: int = 10, n: int = 500, color_by: str = "kind", on_open: OpenText | None = None) -> None:
        if view not in VIEWS:
            raise ValueError(f"view must be one of {', '.join(VIEWS)}; got {view!r}.")
        check_stat(stat)
        self.corpus = open_corpus(corpus, model, tokenizer)
        self._model, self._tokenizer = model, tokenizer
        self.on_open = on_open
        self.k, self.n = int(k), int(n)
        self._token_cache: dict[int, list[str]] = {}
        self.opened: dict[str, Any] | None = None  # the last text opened: text_id, text, layer, head, position
        self.attention: Any = None  # the panel's own attention panel, made on the first text opened
        self.message = lean(widgets.HTML)
        self.view = toggle_buttons([(VIEW_NAMES[v], v) for v in VIEWS], view)
        # the atlas
        self.stat = lean(widgets.Dropdown, options=[(s.label, s.name) for s in STATISTICS], value=stat,
                         description="statistic", style=LABEL_STYLE, layout={"width": "auto"})
        self.order = toggle_buttons((("most", True), ("least", False)), True,
                                    ["texts where the head does most of it", "texts where it does least"])
        self.atlas = lean(AtlasView)
        # nearest contexts
        self.query = lean(widgets.Text, value=query, description="text", style=LABEL_STYLE,
                          layout={"width": "420px"})
        self.position = lean(widgets.Dropdown, description="token", style=LABEL_STYLE, layout={"width": "auto"})
        self.search_layer = lean(widgets.Dropdown, options=list(self.corpus.vector_layers), description="layer",
                                 style=LABEL_STYLE, layout={"width": "auto"})
        self.search_button = lean(widgets.Button, description="Search", icon="search", layout={"width": "auto"})
        self.nearest = lean(NearestView)
        # the query-key map
        heads = [tuple(int(v) for v in pair) for pair in self.corpus.qk_heads]
        self.qk_head = lean(widgets.Dropdown, options=[(f"layer {a} · head {b}", (a, b)) for a, b in heads],
                            description="head", style=LABEL_STYLE, layout={"width": "auto"})
        self.color_by = toggle_buttons((("kind", "kind"), ("position", "position")), color_by,
                                       ["queries blue, keys orange", "coloured by the token's position"])
        self.qk_map = lean(QKMapView)
        self.export_bar = ExportBar(self, "corpus-atlas")
        self.toolbars = {
            "atlas": toolbar(self.stat, labelled("texts", self.order)),
            "nearest": toolbar(self.query, self.position, self.search_layer, self.search_button),
            "qk map": toolbar(self.qk_head, labelled("colour", self.color_by)),
        }
        self.slots = {name: widgets.VBox([self.toolbars[name], figure], layout=widgets.Layout(display="none"))
                      for name, figure in (("atlas", self.atlas), ("nearest", self.nearest),
                                           ("qk map", self.qk_map))}
        self.attention_slot = lean(widgets.VBox)
        header = lean(widgets.HTML, self.header_html())
        super().__init__([header, toolbar(labelled("view", self.view), self.export_bar), self.message,
                          *self.slots.values(), self.attention_slot])
        for figure in (self.atlas, self.nearest, self.qk_map):
            figure.on_open(self.open_text)
            figure.observe(lambda _: self.figure_changed(), names="svg")
        self._made: set[str] = set()
        self.atlas.observe(lambda _: self._list_top_texts(), names="selected")
        self.stat.observe(lambda _: self._draw_atlas(), names="value")
        self.order.observe(lambda _: self._list_top_texts(), names="value")
        self.query.observe(lambda _: self._tokens_of_query(), names="value")
        self.search_button.on_click(lambda _: self.search())
        self.qk_head.observe(lambda _: self._draw_qk_map(), names="value")
        self.color_by.observe(lambda change: self.qk_map.recolor(change["new"]), names="value")
        self.view.observe(lambda _: self._show_view(), names="value")
        if heads:
            wanted = (layer, head) if layer is not None and head is not None else heads[0]
            if wanted not in heads:
                raise ValueError(f"the corpus stores queries and keys of layer {wanted[0]} · head {wanted[1]} only "
                                 f"if analysed with them; it has {', '.join(f'{a}·{b}' for a, b in heads)}.")
            with self.qk_head.hold_trait_notifications():
                self.qk_head.value = wanted
        if search_layer is not None and search_layer not in self.search_layer.options:
            stored = f"layers {list(self.search_layer.options)}" if self.search_layer.options else "none"
            raise ValueError(f"search_layer {search_layer!r} has no stored hidden states; this corpus stores {stored}.")
        if self.search_layer.options:
            self.search_layer.value = search_layer if search_layer is not None else self.search_layer.options[-1]
        self._search_position = position
        self._show_view()

    # what the panel reads ------------------------------------------------------------------------------------
    def header_html(self) -> str:
        """"corpus: 1,000 texts · all-MiniLM-L6-v2 · 6 layers × 12 heads", escaped."""
        corpus = self.corpus
        layers = list(corpus.layers)
        return (f"<div class='bvl-panel-html bvl-corpus-header'>corpus: <b>{corpus.num_texts:,} texts</b> · "
                f"{escape(self.model_label())} · {len(layers)} layers × {corpus.num_heads} heads analysed</div>")

    def model_label(self) -> str:
        """The name of the model the corpus was analysed with ("default" names the packaged pretrained one)."""
        name = self.corpus.model_name
        return DEFAULT_MODEL_NAME if name == "default" else name

    def model_and_tokenizer(self) -> tuple[torch.nn.Module, Any]:
        """The model and tokenizer that read a search's text and the texts opened (the default ones, loaded on
        first use, where none was given)."""
        if self._model is None or self._tokenizer is None:
            from bertviz_lab.widgets.panels.models import model_and_tokenizer

            self._model, self._tokenizer = model_and_tokenizer(self._model, self._tokenizer)
        return self._model, self._tokenizer

    def _tokens(self, text_id: int) -> list[str]:
        """The tokens of a corpus text, read once per panel."""
        tokens = self._token_cache.get(text_id)
        if tokens is None:
            tokens = self._token_cache[text_id] = list(self.corpus.tokens(text_id))
        return tokens

    # the views -------------------------------------------------------------------------------------------
    def _show_view(self) -> None:
        """Show the chosen view (drawn on first show) and name the export after it."""
        view = self.view.value
        if view not in self._made:
            self._made.add(view)
            {"atlas": self._draw_atlas, "nearest": self._first_search, "qk map": self._draw_qk_map}[view]()
        for name, slot in self.slots.items():
            slot.layout.display = "" if name == view else "none"
        self.export_bar.name = {"atlas": f"corpus-atlas-{self.stat.value}", "nearest": "corpus-nearest",
                                "qk map": "corpus-qk-map"}[view]
        self.figure_changed()

    def _failed(self, error: Exception | str) -> None:
        self.message.value = error_html(error)

    def _draw_atlas(self) -> None:
        stats = self.corpus.head_stats()
        note = f"{self.corpus.num_texts:,} texts · each head's mean over every query token, weighted by tokens"
        self.atlas.show(stats, self.stat.value, note)
        self._list_top_texts()

    def _list_top_texts(self) -> None:
        """The chosen head's top texts for the statistic shown, under the grid."""
        selected = self.atlas.selected
        if len(selected) != 2:
            self.atlas.show_top(None)
            return
        try:
            top = self.corpus.top_texts(selected[0], selected[1], self.stat.value, k=self.k,
                                        largest=self.order.value)
        except ValueError as error:
            self._failed(error)
            return
        self.message.value = ""
        self.atlas.show_top(top, largest=self.order.value)

    def choose_head(self, layer: int, head: int) -> None:
        """Choose a head in the atlas, as a click does: its top texts are listed."""
        self.atlas.selected = [int(layer), int(head)]

    def _tokens_of_query(self) -> None:
        """The search text's tokens as the position's options (the first word chosen)."""
        text = self.query.value
        try:
            _, tokenizer = self.model_and_tokenizer()
            ids = encode_text(None, tokenizer, text).encoding["input_ids"][0].tolist()
        except ValueError as error:
            self.position.options = []
            self._failed(error)
            return
        tokens = tokenizer.convert_ids_to_tokens(ids)
        self.position.options = [(f"{i} · {token}", i) for i, token in enumerate(tokens)]
        self.position.value = longest_word(tokens)

    def _first_search(self) -> None:
        self._tokens_of_query()
        if self._search_position is not None:
            self.position.value = self._search_position
        self.search()

    def search(self, text: str | None = None, position: int | None = None, layer: int | None = None) -> None:
        """Search the corpus for the contexts nearest to a token of a text (default: the toolbar's)."""
        if not self.corpus.vector_layers:
            self.message.value = error_html("this corpus stores no hidden states: analyse it with "
                                            "vectors=('hidden',) to search it")
            return
        self._made.add("nearest")  # drawn here: showing the view later keeps this search
        if text is not None and text != self.query.value:
            self.query.value = text
        if not self.position.options:
            self._tokens_of_query()
        if position is not None:
            if position not in [value for _, value in self.position.options]:
                self._failed(f"position {position} is not in the text, which has {len(self.position.options)} "
                             "tokens.")
                return
            self.position.value = position
        if layer is not None:
            self.search_layer.value = layer
        if self.position.value is None:
            return
        text, position, layer = self.query.value, self.position.value, self.search_layer.value
        try:
            matches = self.corpus.nearest(text, position, layer, k=self.k)
        except ValueError as error:
            self._failed(error)
            return
        self.message.value = ""
        token = self.position.label.partition(" · ")[2]
        self.nearest.show(matches, f"“{token}” in “{shortened(text, 40)}”", layer)

    def _draw_qk_map(self) -> None:
        if self.qk_head.value is None:
            self.message.value = error_html("this corpus stores no queries and keys: analyse it with "
                                            "vectors=('qk',) to map them")
            return
        layer, head = self.qk_head.value
        try:
            points = self.corpus.qk_map(layer, head, n=self.n)
        except ValueError as error:
            self._failed(error)
            return
        self.message.value = ""
        contexts = [in_context(self._tokens(int(t)), int(p))
                    for t, p in zip(points["text_id"].tolist(), points["position"].tolist())]
        self.qk_map.show(points, layer, head, contexts, self.color_by.value)

    # opening a text ------------------------------------------------------------------------------------------
    def open_text(self, text_id: int, layer: int | None = None, head: int | None = None,
                  position: int | None = None, index: int | None = None) -> None:
        """Show a corpus text in the attention panel: at `layer` and `head` (an atlas head, a q-k map's head), at the
        token `position` (a match, a point); `index` marks what was opened in the view on screen."""
        text, text_b = self.corpus.text(int(text_id))
        view = self.view.value
        if view == "nearest" and layer is None:
            layer = self.search_layer.value
        if view == "qk map" and layer is None and self.qk_head.value is not None:
            layer, head = self.qk_head.value
        if index is not None and view in ("nearest", "qk map"):
            (self.nearest if view == "nearest" else self.qk_map).selected = index
        self.opened = {"text_id": int(text_id), "text": text, "text_b": text_b, "layer": layer, "head": head,
                       "position": position}
        if self.on_open is not None:
            self.on_open(text, text_b, layer, head, position)
            return
        model, tokenizer = self.model_and_tokenizer()
        if self.attention is None:
            from bertviz_lab.widgets.panels.attention import AttentionPanel

            self.attention = AttentionPanel(model=model, tokenizer=tokenizer, text=text, text_b=text_b,
                                            layer=layer or 0, head=head or 0)
            self.attention_slot.children = (self.attention,)
        else:
            self.attention.set_text(text, text_b)
        show_at(self.attention, layer, head, position)

    # saving ----------------------------------------------------------------------------------------------------
    def figure(self, view: str | None = None) -> Any:
        """The view widget of `view` (default: the one on screen), drawn."""
        view = self.view.value if view is None else view
        if view not in VIEWS:
            raise ValueError(f"view must be one of {', '.join(VIEWS)}; got {view!r}.")
        if view not in self._made:
            self._made.add(view)
            {"atlas": self._draw_atlas, "nearest": self._first_search, "qk map": self._draw_qk_map}[view]()
        return {"atlas": self.atlas, "nearest": self.nearest, "qk map": self.qk_map}[view]

    def to_plotly(self, view: str | None = None) -> Any:
        """The atlas or the query-key map (default: the view on screen) as a plotly Figure, with the drawing's
        values, colours, titles and hover; the nearest contexts are a list, not a chart: save() them."""
        view = self.view.value if view is None else view
        if view == "nearest":
            raise ValueError("to_plotly() gives the atlas or the qk map; the nearest contexts are a list (save() "
                             "their SVG).")
        return self.figure(view).to_plotly()

    def to_svg(self, view: str | None = None) -> str:
        """The figure of `view` (default: the one on screen) as a standalone SVG document."""
        return self.figure(view).to_svg()

    def caption_parts(self) -> tuple[str, str | None, str | None]:
        """The corpus's model and size, for an export's caption."""
        return f"{self.model_label()} · corpus of {self.corpus.num_texts:,} texts", None, None

    def save(self, path: str | Path, scale: float = 1, theme: str = "light", caption: bool | str = False, *,
             view: str | None = None) -> Path:
        """Write the figure of `view` (default: the one on screen: "atlas", "nearest" or "qk map") to `path`: SVG or
        PNG by its suffix, `scale` times its size, in the light or dark theme, with a caption line if asked."""
        return save_figure(self.to_svg(view), path, scale, theme, all_css(), self.caption(caption))

    def release(self) -> None:
        """A closed panel lets go of its corpus and the tokens it read."""
        self.__dict__.get("_token_cache", {}).clear()
        self.corpus = None


def show_at(panel: Any, layer: int | None, head: int | None, position: int | None) -> None:
    """Point an attention panel at a layer, a head and a token (each where given and where it exists)."""
    if layer is not None and layer in panel.layer.options:
        panel.layer.value = layer
    if head is not None and head in panel.head.options:
        panel.head.value = head
    if position is not None:
        positions = [value for _, value in panel.query.options]
        if position in positions:
            panel.query.value = position
            panel.heatmap.selected = [position, position]
