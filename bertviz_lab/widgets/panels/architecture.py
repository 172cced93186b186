"""ArchitecturePanel: the traced model as a graphviz or mermaid diagram with tensor shapes, and its parameter table.

Diagrams run top to bottom so they fit a notebook's width with readable text: the Graphviz figure (to_svg(), the same
document the static copy and save() hold) is shown by the project's own view (views/architecture.js) fit to the
panel's width, never below 12 px text, with zoom, pan and "fit" (the whole diagram in both directions); its labels
are in the shipped DejaVu Sans, its ground and cluster titles follow the theme, and its nodes keep a light fill with
black ink. Mermaid gets the same direction, a 16 px font and the same view: the front end draws the mermaid output
(marked bvl-mermaid-source) and the view shows that drawing with the same fit, zoom and pan.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import ipywidgets as widgets
import torch
from IPython.display import display

from bertviz_lab.trace.diagram import to_graphviz, to_mermaid
from bertviz_lab.trace.hooks import Trace, trace
from bertviz_lab.widgets.figures.charts import svg_open
from bertviz_lab.widgets.figures.export import svg_size
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.panel import Panel, error_html
from bertviz_lab.widgets.panels.running import evaluating
from bertviz_lab.widgets.views.diagram import GRAPHVIZ_FONT, DiagramView

RENDERERS = ("mermaid", "graphviz")
LABELLED = {"description_width": "initial"}
MERMAID_FONT_PX = 16
PX_PER_PT = 4 / 3


def dot_available() -> bool:
    """True where Graphviz's `dot` program is on PATH."""
    return shutil.which("dot") is not None


def example_inputs(model: torch.nn.Module, input_shape: tuple[int, int] = (1, 8)) -> dict[str, torch.Tensor]:
    """Token ids of the given shape for a BERT model (ids above the special range, on the model's device)."""
    vocab_size: int = getattr(model, "config").vocab_size  # any BERT's config (ours, Hugging Face's), read by name
    low = min(1000, vocab_size - 1)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(low, vocab_size, input_shape, generator=generator)
    return {"input_ids": ids.to(next(model.parameters()).device)}


def trace_shapes(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> Trace:
    """One forward pass recording every module call's shapes (no attention maps)."""
    with evaluating(model), torch.inference_mode(), trace(model, attentions=False, shapes=True) as recorded:
        model(**inputs)
    return recorded


def svg_document(svg: str) -> str:
    """Graphviz's SVG without its XML prologue, sized in pixels (it writes points): ready to nest or to save."""
    svg = svg[svg.index("<svg"):]
    end = svg.index(">") + 1
    root = re.sub(r'\b(width|height)="([\d.]+)pt"', lambda m: f'{m.group(1)}="{float(m.group(2)) * PX_PER_PT:.0f}"',
                  svg[:end])
    return root + svg[end:]


class ArchitecturePanel(Panel):
    """Renderer choice, depth, collapse and shapes toggles around the diagram; the parameter table below."""

    def __init__(self, model: torch.nn.Module, inputs: dict[str, torch.Tensor] | None = None,
                 input_shape: tuple[int, int] = (1, 8), renderer: str | None = None, depth: int = 3,
                 direction: str = "TB", trace: Trace | None = None) -> None:
        renderer = renderer or ("graphviz" if dot_available() else "mermaid")
        if renderer not in RENDERERS:
            raise ValueError(f"renderer must be one of {RENDERERS}, got {renderer!r}.")
        self.model, self.direction = model, direction
        self.trace: Trace | None = None
        self.inputs = inputs if inputs is not None else example_inputs(model, input_shape)
        self._svg_cache: dict[tuple, str] = {}
        # ToggleButtons draw their own description above the buttons: the label is a Label beside them
        self.renderer = widgets.ToggleButtons(options=RENDERERS, value=renderer, style={"button_width": "auto"})
        self.depth = widgets.IntSlider(value=depth, min=1, max=8, description="depth", style=LABELLED,
                                       layout=widgets.Layout(width="220px"))
        self.collapse = widgets.Checkbox(value=True, description="collapse repeats", indent=False,
                                         layout=widgets.Layout(width="auto"))
        self.shapes = widgets.Checkbox(value=True, description="shapes", indent=False,
                                       layout=widgets.Layout(width="auto"))
        self.export = ExportBar(self, "architecture")
        self.error = widgets.HTML()
        self.diagram_output = widgets.Output()  # mermaid, drawn by the front end's own renderer
        self.diagram_output.add_class("bvl-mermaid-source")  # the view shows its drawing, with zoom and pan
        self.graph_view = DiagramView()
        self.table = widgets.HTML()
        toolbar = widgets.HBox([widgets.Label("draw with"), self.renderer, self.depth, self.collapse, self.shapes,
                                self.export],
                               layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
        toolbar.add_class("bvl-toolbar")
        super().__init__([toolbar, self.error, self.diagram_output, self.graph_view,
                          widgets.HTML("<b>parameters</b> (click a module to open it)"), self.table])
        if trace is not None:  # recorded with shapes on `inputs` already (a Workbench's shared forward)
            self.show_trace(trace)
        else:
            self.rerun()
        for control in (self.renderer, self.depth, self.collapse, self.shapes):
            control.observe(lambda _: self.redraw(), names="value")

    def rerun(self, *_: Any) -> None:
        """Trace the model again (after a device move or a new input) and redraw."""
        device = next(self.model.parameters()).device
        self.inputs = {k: v.to(device) for k, v in self.inputs.items()}
        self.show_trace(trace_shapes(self.model, self.inputs))

    def _trace(self) -> Trace:
        """The trace drawn; a closed panel has let go of it."""
        if self.trace is None:
            raise ValueError("the architecture panel holds no trace: it was closed, or nothing was traced yet.")
        return self.trace

    def release(self) -> None:
        """A closed panel lets go of its trace (a workbench's holds every layer's attention) and drawings."""
        self.trace, self._svg_cache = None, {}

    def show_trace(self, trace: Trace, inputs: dict[str, torch.Tensor] | None = None) -> None:
        """Draw a trace recorded with shapes (by rerun, or a forward shared with other panels) of `inputs`."""
        if not trace.calls:
            raise ValueError("the trace holds no module calls; record it with trace(model, shapes=True).")
        if inputs is not None:
            self.inputs = inputs
        self.trace = trace
        self._svg_cache.clear()
        self.table.value = trace.summary().collapsible_html()
        self.redraw()

    def _options(self) -> dict[str, Any]:
        return {"depth": self.depth.value, "collapse_repeats": self.collapse.value, "show_shapes": self.shapes.value,
                "direction": self.direction}

    def diagram(self, renderer: str | None = None) -> Any:
        """The diagram object for the current settings (MermaidDiagram or graphviz.Digraph)."""
        if (renderer or self.renderer.value) == "mermaid":
            return to_mermaid(self._trace(), font_size=MERMAID_FONT_PX, **self._options())
        return to_graphviz(self._trace(), font_size=GRAPHVIZ_FONT, **self._options())

    def graphviz_svg(self) -> str:
        """Graphviz's drawing of the current settings as an SVG document; FileNotFoundError without `dot`."""
        key = tuple(self._options().values())
        if key not in self._svg_cache:
            dot = self.diagram("graphviz")
            dot.attr(bgcolor="transparent")  # the figure's themed ground shows through
            self._svg_cache[key] = svg_document(dot.pipe(format="svg", encoding="utf-8"))
        return self._svg_cache[key]

    def redraw(self) -> None:
        """Draw the diagram with the chosen renderer (mermaid when Graphviz is missing, saying so)."""
        renderer, self.error.value = self.renderer.value, ""
        if renderer == "graphviz":
            try:
                self.graph_view.svg = self.to_svg()
            except (FileNotFoundError, ImportError, RuntimeError) as error:
                self.error.value = f"{error_html(error)} Showing mermaid instead."
                renderer = "mermaid"
        with self.graph_view.hold_sync():  # one view for both: it hides itself until mermaid is drawn
            self.graph_view.renderer = renderer
            self.graph_view.font_size = GRAPHVIZ_FONT if renderer == "graphviz" else MERMAID_FONT_PX
        self.diagram_output.layout.display = None if renderer == "mermaid" else "none"
        self.diagram_output.clear_output(wait=True)
        if renderer == "mermaid":
            with self.diagram_output:
                display(self.diagram("mermaid"))
        self.figure_changed()

    def title(self) -> str:
        """What the figure shows, in one line."""
        return (f"{self._trace().model_class} · depth {self.depth.value}"
                + (" · repeats collapsed" if self.collapse.value else "") + (" · shapes" if self.shapes.value else ""))

    def to_svg(self) -> str:
        """Graphviz's diagram under a title, as a standalone SVG; FileNotFoundError names Graphviz when `dot` is
        missing (the mermaid source is in static_html() then)."""
        diagram = self.graphviz_svg()
        width, height = svg_size(diagram)
        width, height = round(max(width, 400)), round(height + 34)
        title = f'<text class="bvl-title" x="8" y="20" font-size="15" font-weight="bold">{escape(self.title())}</text>'
        return svg_open(width, height, "architecture", font_size=None) + title + diagram.replace(
            "<svg ", '<svg x="0" y="34" ', 1) + "</svg>"

    def static_html(self) -> str:
        """The Graphviz drawing (or, without `dot`, the mermaid source) and the folding parameter table."""
        if dot_available():
            figure = self.to_svg()
        else:
            source = str(self.diagram("mermaid"))
            # not class "mermaid": a page with a mermaid loader (a docs theme's) would fetch it from a CDN to draw it
            figure = (f"<p>{escape(self.title())}: install Graphviz (its `dot` program) to draw the diagram here; "
                      f"its mermaid source:</p><pre class='bvl-mermaid-text'>{escape(source)}</pre>")
        return (f"<div class='bvl-architecture'><div class='bvl-diagram-static'>{figure}</div>"
                f"<p><b>parameters</b></p>{self._trace().summary().collapsible_html()}</div>")
