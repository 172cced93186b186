"""ArchitecturePanel: the traced model as a mermaid or graphviz diagram with tensor shapes, and its parameter table."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import torch
from IPython.display import display

from bertviz_lab.trace.diagram import to_graphviz, to_mermaid
from bertviz_lab.trace.hooks import Trace, trace
from bertviz_lab.widgets.common import Panel, escape, evaluating

RENDERERS = ("mermaid", "graphviz")


def example_inputs(model: torch.nn.Module, input_shape: tuple[int, int] = (1, 8)) -> dict[str, torch.Tensor]:
    """Token ids of the given shape for a BERT model (ids above the special range, on the model's device)."""
    config = model.config
    low = min(1000, config.vocab_size - 1)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(low, config.vocab_size, input_shape, generator=generator)
    return {"input_ids": ids.to(next(model.parameters()).device)}


def trace_shapes(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> Trace:
    """One forward pass recording every module call's shapes (no attention maps)."""
    with evaluating(model), torch.inference_mode(), trace(model, attentions=False, shapes=True) as recorded:
        model(**inputs)
    return recorded


class ArchitecturePanel(Panel):
    """Renderer choice, depth, collapse and shapes toggles around the diagram; the parameter table below."""

    def __init__(self, model: torch.nn.Module, inputs: dict[str, torch.Tensor] | None = None,
                 input_shape: tuple[int, int] = (1, 8), renderer: str = "mermaid", depth: int = 3) -> None:
        if renderer not in RENDERERS:
            raise ValueError(f"renderer must be one of {RENDERERS}, got {renderer!r}.")
        self.model = model
        self.inputs = inputs if inputs is not None else example_inputs(model, input_shape)
        self.renderer = widgets.ToggleButtons(options=RENDERERS, value=renderer, description="draw with")
        self.depth = widgets.IntSlider(value=depth, min=1, max=8, description="depth")
        self.collapse = widgets.Checkbox(value=True, description="collapse repeats", indent=False)
        self.shapes = widgets.Checkbox(value=True, description="shapes", indent=False)
        self.diagram_output = widgets.Output()
        self.table = widgets.HTML()
        controls = widgets.HBox([self.renderer, self.depth, self.collapse, self.shapes])
        super().__init__([controls, self.diagram_output, widgets.HTML("<b>parameters</b>"), self.table])
        self.rerun()
        for control in (self.renderer, self.depth, self.collapse, self.shapes):
            control.observe(lambda _: self.redraw(), names="value")

    def rerun(self, *_: Any) -> None:
        """Trace the model again (after a device move or a new input) and redraw."""
        device = next(self.model.parameters()).device
        self.inputs = {k: v.to(device) for k, v in self.inputs.items()}
        self.trace = trace_shapes(self.model, self.inputs)
        self.table.value = self.trace.summary()._repr_html_()
        self.redraw()

    def diagram(self) -> Any:
        """The diagram object for the current settings (MermaidDiagram or graphviz.Digraph)."""
        options = {"depth": self.depth.value, "collapse_repeats": self.collapse.value, "show_shapes": self.shapes.value}
        return (to_mermaid if self.renderer.value == "mermaid" else to_graphviz)(self.trace, **options)

    def redraw(self) -> None:
        try:
            diagram = self.diagram()
        except (RuntimeError, ValueError) as error:  # e.g. graphviz asked for but `dot` is not installed
            diagram = widgets.HTML(f"<span style='color:#d62728'>{escape(error)}</span>")
        self.diagram_output.clear_output(wait=True)
        with self.diagram_output:
            display(diagram)

    def static_html(self) -> str:
        source = str(to_mermaid(self.trace, depth=self.depth.value, collapse_repeats=self.collapse.value,
                                show_shapes=self.shapes.value))
        return (f"<div class='bvl-architecture'><pre class='mermaid'>{escape(source)}</pre>"
                f"{self.trace.summary()._repr_html_()}</div>")
