"""FFNNeuronsPanel: the feed-forward neurons of a BERT on one text (CircuitsVis's text-neuron view) — which neurons of
a layer fire most at a token, how one neuron fires over the whole text, and, with an analysed corpus, which corpus
texts make it fire most.

One traced forward per text and model records every layer's `encoder.layer.{i}.intermediate.act` (the activations
after GELU, through `trace(..., mlp=True)`); choosing another layer, token, neuron or k re-slices that tensor and
draws again without running the model. The figures are figures/ffn_neurons.py's, each in a CellGridView, so hover
and the keys read every exact value without the kernel and a click opens a neuron, a token or a corpus text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import ipywidgets as widgets
import torch

from bertviz_lab.model.encoding import encode_text
from bertviz_lab.trace.hooks import trace
from bertviz_lab.widgets.figures.charts import stacked
from bertviz_lab.widgets.figures.ffn_neurons import at_token, corpus_texts_svg, neuron_text_svg, top_neurons_svg
from bertviz_lab.widgets.panels.controls import LABEL_STYLE, Hold, lean, toolbar
from bertviz_lab.widgets.panels.corpus import longest_word
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.panel import Panel, error_html, notice_html
from bertviz_lab.widgets.panels.running import evaluating, threads_for
from bertviz_lab.widgets.views.cell_grid import CellGridView

DEFAULT_TEXT = "The capital of France is Paris."
CORPUS_TEXTS = 5  # corpus texts listed for the chosen neuron
OpenText = Callable[[str, "str | None", int, int], None]  # (text, text_b, layer, position)


def record_activations(model: torch.nn.Module, tokenizer: Any, text: str,
                       text_b: str | None = None) -> tuple[torch.Tensor, list[str], Any]:
    """(activations (layers, seq, d_ff) float32 on the CPU, tokens, truncation) of one forward in eval mode: every
    layer's feed-forward activation after GELU, as the trace's `mlp` records it (the hook point
    `intermediate.act`)."""
    encoded = encode_text(model, tokenizer, text, text_b)
    ids = encoded.inputs["input_ids"]
    with evaluating(model), threads_for(model, ids.shape[-1], ids.device), torch.inference_mode(), \
            trace(model, attentions=False, shapes=False, mlp=True) as recorded:
        model(**encoded.inputs)
    layers = recorded.mlp
    if not layers:
        raise ValueError(f"{type(model).__name__} has no feed-forward hook points (encoder.layer.i.intermediate.act).")
    activations = torch.stack([layers[i][0] for i in sorted(layers)]).float().cpu()
    tokens = list(tokenizer.convert_ids_to_tokens(ids[0].tolist()))
    return activations, tokens, encoded.truncation


def _whole(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            if hasattr(value, "item") and float(value.item()).is_integer():
                return int(value.item())
        except (TypeError, ValueError):
            pass
        raise ValueError(f"{name} must be a whole number, got {value!r}.")
    return int(value)


def _index(value: Any, name: str, count: int, range_says: str) -> int:
    """`value` as an index below `count`; else a one-line ValueError naming the range ("this model has layers
    0..5")."""
    index = _whole(value, name)
    if not 0 <= index < count:
        raise ValueError(f"{name} {index} does not exist; {range_says} 0..{count - 1}.")
    return index


class FFNNeuronsPanel(Panel):
    """The feed-forward neurons of a model on a text: a layer, a token, the k neurons most active there (a bar each,
    a click chooses one), the chosen neuron's activation on every token (a click chooses the token), and with a
    corpus the corpus texts where that neuron fires most (a click opens the text: `on_open_text` callbacks, or this
    panel itself where none is set).

    model, tokenizer: a bertviz_lab model of any family, with or without a head; text: what it reads; layer,
    position: the layer and the token (default: the longest word); neuron: the neuron shown over the text (default:
    the most active at the token, following the token until one is chosen); k: neurons listed; corpus: a Corpus
    (or its folder) analysed with neuron maxima.
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any, text: str = DEFAULT_TEXT, layer: int = 0,
                 position: int | None = None, neuron: int | None = None, k: int = 10, corpus: Any = None, *,
                 text_b: str | None = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.text, self.text_b = text, text_b or None
        self.forwards = 0  # forward passes run: one per text and model
        self._activations: torch.Tensor | None = None
        self.tokens: list[str] = []
        self.truncation: Any = None
        self.corpus: Any = None
        self._corpus_rows: dict[tuple[int, int], Any] = {}
        self._corpus_error: str = ""
        self._opened: tuple[int, int, int] | None = None  # (layer, neuron, row) of the corpus text opened last
        self._open_listeners: list[OpenText] = []
        self._neuron: int | None = None  # a neuron chosen; None follows the most active at the token
        self._holding = Hold()  # open while the panel sets its own controls: no redraw per control
        self.message = lean(widgets.HTML)
        self.notice = lean(widgets.HTML)
        self.layer = lean(widgets.Dropdown, description="layer", style=LABEL_STYLE, layout={"width": "auto"})
        self.position = lean(widgets.Dropdown, description="token", style=LABEL_STYLE, layout={"width": "auto"})
        self.neuron = lean(widgets.IntText, description="neuron", style=LABEL_STYLE, layout={"width": "150px"})
        self.k = lean(widgets.BoundedIntText, value=10, min=1, max=10**6, description="k", style=LABEL_STYLE,
                      layout={"width": "100px"})
        self.top_view = lean(CellGridView, label="the most active neurons at the token")
        self.text_view = lean(CellGridView, label="one neuron over the text")
        self.corpus_view = CellGridView(label="corpus texts where the neuron fires most",
                                        layout=widgets.Layout(display="none"))
        self.export_bar = ExportBar(self, "ffn-neurons")
        super().__init__([toolbar(self.layer, self.position, self.neuron, self.k, self.export_bar), self.message,
                          self.notice, self.top_view, self.text_view, self.corpus_view])
        self._record()
        self.set(layer=layer, position=longest_word(self.tokens) if position is None else position, neuron=neuron,
                 k=k)
        if corpus is not None:
            self.set_corpus(corpus)
        self.layer.observe(lambda change: self._from_control(layer=change["new"]), names="value")
        self.position.observe(lambda change: self._from_control(position=change["new"]), names="value")
        self.neuron.observe(lambda change: self._from_control(neuron=change["new"]), names="value")
        self.k.observe(lambda change: self._from_control(k=change["new"]), names="value")
        self.top_view.on_open(self._neuron_opened)
        self.text_view.on_open(lambda row, col: self._from_control(position=col))
        self.corpus_view.on_open(lambda row, col: self.open_corpus_text(row))

    # what the panel holds ----------------------------------------------------------------------------------------
    @property
    def activations(self) -> torch.Tensor:
        """Every layer's feed-forward activations after GELU on the text, (layers, seq, d_ff), float32 on the CPU:
        exactly what the hook points `encoder.layer.{i}.intermediate.act` held in the panel's forward."""
        if self._activations is None:
            raise ValueError("the panel holds no activations: it was closed.")
        return self._activations

    def layer_activations(self, layer: int) -> torch.Tensor:
        """One layer's activations, (seq, d_ff)."""
        return self.activations[self._check_layer(layer)]

    @property
    def num_layers(self) -> int:
        """Layers with a feed-forward block."""
        return int(self.activations.shape[0])

    @property
    def num_neurons(self) -> int:
        """Neurons per layer (the feed-forward's width, d_ff)."""
        return int(self.activations.shape[2])

    @property
    def chosen_neuron(self) -> int:
        """The neuron shown over the text: the one chosen, else the most active at the token."""
        if self._neuron is not None:
            return self._neuron
        return int(torch.argmax(self.activations[self.layer.value, self.position.value]).item())

    def top_neurons(self) -> tuple[list[int], torch.Tensor]:
        """(neurons, activations) of the k most active neurons at the chosen layer and token, most active first."""
        values, ids = torch.topk(self.activations[self.layer.value, self.position.value],
                                 min(int(self.k.value), self.num_neurons))
        return [int(i) for i in ids.tolist()], values

    # running the model -------------------------------------------------------------------------------------------
    def _record(self) -> None:
        """The one forward for this text and model; the controls take the new layers and tokens."""
        activations, tokens, truncation = record_activations(self.model, self.tokenizer, self.text, self.text_b)
        self.forwards += 1
        self._activations, self.tokens, self.truncation = activations, tokens, truncation
        self._corpus_rows.clear()
        self.notice.value = notice_html(truncation)
        with self._holding():
            self.layer.options = list(range(activations.shape[0]))
            self.position.options = [(f"{i} · {token}", i) for i, token in enumerate(tokens)]

    def set_text(self, text: str, text_b: str | None = None) -> None:
        """Read another text (one forward): the layer and a chosen neuron stay, the token becomes the text's longest
        word."""
        previous = (self.text, self.text_b)
        self.text, self.text_b = text, text_b or None
        try:
            self._record()
        except ValueError:
            self.text, self.text_b = previous
            raise
        self.set(layer=self.layer.value if self.layer.value is not None else 0, position=longest_word(self.tokens))

    def set_model(self, model: torch.nn.Module, tokenizer: Any) -> None:
        """Show another model on the same text (one forward): the layer and the chosen neuron stay where the model
        has them, the token becomes the longest word."""
        previous = (self.model, self.tokenizer)
        self.model, self.tokenizer = model, tokenizer
        try:
            self._record()
        except ValueError:
            self.model, self.tokenizer = previous
            raise
        if self._neuron is not None and self._neuron >= self.num_neurons:
            self._neuron = None
        layer = self.layer.value if self.layer.value is not None else 0
        self.set(layer=min(layer, self.num_layers - 1), position=longest_word(self.tokens))

    # choosing ------------------------------------------------------------------------------------------------------
    def _check_layer(self, layer: Any) -> int:
        return _index(layer, "layer", self.num_layers, "this model has layers")

    def _check_position(self, position: Any) -> int:
        return _index(position, "position", len(self.tokens), "the text has positions")

    def _check_neuron(self, neuron: Any) -> int:
        return _index(neuron, "neuron", self.num_neurons, "each layer has neurons")

    def _check_k(self, k: Any) -> int:
        k = _whole(k, "k")
        if not 1 <= k <= self.num_neurons:
            raise ValueError(f"k must be from 1 to {self.num_neurons} (the neurons of a layer), got {k}.")
        return k

    def set(self, layer: int | None = None, position: int | None = None, neuron: int | None = None,
            k: int | None = None) -> None:
        """Choose the layer, the token, the neuron and k together (those given), drawn once; no forward runs. A
        value out of range is a ValueError naming the range, and nothing changes."""
        layer = self._check_layer(layer) if layer is not None else self.layer.value
        position = self._check_position(position) if position is not None else self.position.value
        if position is None:
            position = longest_word(self.tokens)
        neuron = self._check_neuron(neuron) if neuron is not None else self._neuron
        k = self._check_k(k) if k is not None else min(int(self.k.value), self.num_neurons)
        with self._holding():
            self.layer.value, self.position.value, self.k.value = layer, position, k
            self._neuron = neuron
            self.neuron.value = self.chosen_neuron
        self.message.value = ""
        self.redraw()

    def _from_control(self, **choice: Any) -> None:
        """A control or a click changed one value: set it, or show why not in one line."""
        if self._holding:
            return
        try:
            self.set(**choice)
        except ValueError as error:
            self.message.value = error_html(error)

    def _neuron_opened(self, row: int, col: int) -> None:
        """A neuron's bar clicked: it becomes the neuron shown over the text."""
        neurons, _ = self.top_neurons()
        if 0 <= row < len(neurons):
            self._from_control(neuron=neurons[row])


    # drawing -------------------------------------------------------------------------------------------------------
    def redraw(self) -> None:
        """Draw the figures for the chosen layer, token and neuron from the recorded activations."""
        layer, position, neuron = self.layer.value, self.position.value, self.chosen_neuron
        token = self.tokens[position]
        neurons, values = self.top_neurons()
        rank = neurons.index(neuron) if neuron in neurons else None
        self.top_view.show(top_neurons_svg(neurons, values.numpy(), layer, position, token, selected=neuron),
                           f"layer {layer} · the most active neurons at {at_token(position, token)}",
                           None if rank is None else (rank, 0))
        self.text_view.show(neuron_text_svg(self.tokens, self.activations[layer, :, neuron].numpy(), layer, neuron,
                                            selected_position=position),
                            f"layer {layer} · neuron {neuron} over the text", (0, position))
        self._draw_corpus()
        self.export_bar.name = f"ffn-neurons-layer{layer}-neuron{neuron}"
        self.figure_changed()

    # the corpus ----------------------------------------------------------------------------------------------------
    def set_corpus(self, corpus: Any) -> None:
        """List, under the figures, the texts of `corpus` (a Corpus analysed with neuron maxima, or its folder; None
        takes the list away) where the chosen neuron fires most."""
        if isinstance(corpus, (str, Path)):
            from bertviz_lab.corpus import Corpus

            corpus = Corpus.open(corpus, model=self.model, tokenizer=self.tokenizer)
        if corpus is not None and not all(hasattr(corpus, name) for name in ("top_neuron_texts", "text")):
            raise TypeError(f"corpus must be a bertviz_lab.corpus.Corpus or the folder of one, got "
                            f"{type(corpus).__name__}.")
        self.corpus, self._opened = corpus, None
        self._corpus_rows.clear()
        self.corpus_view.layout.display = "none" if corpus is None else ""
        self._draw_corpus()
        self.figure_changed()

    def corpus_texts(self) -> Any:
        """The chosen neuron's top corpus texts (Corpus.top_neuron_texts: text_id, position, token, activation,
        left, right), read once per layer and neuron; a ValueError where the corpus has no neuron maxima."""
        if self.corpus is None:
            raise ValueError("no corpus is set: set_corpus(corpus) with a corpus analysed with neuron maxima.")
        key = (int(self.layer.value), self.chosen_neuron)
        rows = self._corpus_rows.get(key)
        if rows is None:
            kept = getattr(self.corpus, "neurons_kept", CORPUS_TEXTS) or CORPUS_TEXTS  # 0: its own one-line error
            rows = self._corpus_rows[key] = self.corpus.top_neuron_texts(key[0], key[1], k=min(CORPUS_TEXTS, kept))
        return rows

    def _draw_corpus(self) -> None:
        if self.corpus is None:
            self.corpus_view.clear("")
            return
        layer, neuron = self.layer.value, self.chosen_neuron
        try:
            rows = self.corpus_texts()
        except ValueError as error:
            self.corpus_view.clear(str(error))
            return
        opened = self._opened
        selected = opened[2] if opened is not None and opened[:2] == (layer, neuron) and opened[2] < len(rows) \
            else None
        self.corpus_view.show(corpus_texts_svg(rows, layer, neuron, selected=selected),
                              f"layer {layer} · neuron {neuron} · corpus texts",
                              None if selected is None else (selected, 0))

    def on_open_text(self, callback: OpenText) -> None:
        """Call `callback(text, text_b, layer, position)` when a corpus text is opened (a click on its row): a
        Workbench shows it in its attention panel. Without a callback the text opens in this panel."""
        self._open_listeners.append(callback)

    def open_corpus_text(self, row: int) -> None:
        """Open the corpus text of row `row` of the list, at the layer shown and the token where the neuron fires."""
        try:
            rows = self.corpus_texts()
        except ValueError as error:
            self.message.value = error_html(error)
            return
        if not 0 <= row < len(rows):
            self.message.value = error_html(f"row {row} is not in the list, which has {len(rows)} texts.")
            return
        text_id, position = int(rows["text_id"].iloc[row]), int(rows["position"].iloc[row])
        text, text_b = self.corpus.text(text_id)
        layer, neuron = int(self.layer.value), self.chosen_neuron
        self._opened = (layer, neuron, row)
        if self._open_listeners:
            self._draw_corpus()
            self.figure_changed()
            for callback in list(self._open_listeners):
                callback(text, text_b, layer, position)
            return
        self._neuron = neuron  # the neuron stays the one the text was listed for
        self.set_text(text, text_b)
        if 0 <= position < len(self.tokens):
            self.set(position=position)

    # saving ----------------------------------------------------------------------------------------------------------
    def to_svg(self) -> str:
        """The figures on screen stacked as one standalone SVG document: the most active neurons, the neuron over
        the text and, with a corpus, its texts (charts.stacked)."""
        drawings = [view.svg for view in (self.top_view, self.text_view, self.corpus_view) if view.svg]
        return stacked(drawings)

    def release(self) -> None:
        """A closed panel lets go of its activations and its corpus."""
        self._activations = None
        self.__dict__.get("_corpus_rows", {}).clear()
        self.corpus = None
