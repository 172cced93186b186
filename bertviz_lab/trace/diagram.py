"""Architecture diagrams from a Trace (or a model plus an input): mermaid flowchart text and graphviz.Digraph."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from bertviz_lab.trace.graph import ArchitectureGraph, Cluster, Node, build_graph
from bertviz_lab.trace.hooks import Trace, trace

if TYPE_CHECKING:  # optional, and untyped: mypy sees its names as Any
    import graphviz

DIRECTIONS = ("LR", "RL", "TB", "TD", "BT")
# Graphviz's look: the sans family the widgets ship (figures/fonts), so a PNG export draws the same text; light node
# fills with Graphviz's default black ink (written as no fill at all, so a page's stylesheet may set it), and rules in
# mid tones that read on a light and on a dark ground.
GRAPHVIZ_FONT_NAME = "DejaVu Sans"
GRAPHVIZ_COLORS = {"node_fill": "#eef2ff", "node_border": "#4a5572", "io_fill": "#fff4dd", "edge": "#7f7f7f",
                   "cluster": "#8888aa"}
_MERMAID_ENTITIES = {"&": "#amp;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "#": "#35;", "`": "#96;"}


class MermaidDiagram:
    """Mermaid flowchart source that notebooks draw: JupyterLab >= 4.1 natively, else as a markdown fence."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return self.source

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """Native mermaid for JupyterLab >= 4.1, a fenced block for other markdown renderers, the source as text."""
        return {"text/vnd.mermaid": self.source, "text/markdown": f"```mermaid\n{self.source}\n```",
                "text/plain": self.source}


def _traced(model_or_trace: Any, input_shape: Any, inputs: Any) -> Trace:
    """The given Trace, or a shapes-only trace of one forward pass of the given model."""
    if isinstance(model_or_trace, Trace):
        if input_shape is not None or inputs is not None:
            raise ValueError("input_shape and inputs are for a model; a Trace already holds its forward pass.")
        return model_or_trace
    if not isinstance(model_or_trace, nn.Module):
        raise TypeError(f"expected a Trace or a torch.nn.Module, got {type(model_or_trace).__name__}.")
    model = model_or_trace
    if inputs is None:
        if input_shape is None:
            raise ValueError("a model needs input_shape=(batch, seq_len) or inputs=... to run one forward pass "
                             "(or pass a Trace).")
        shape = (input_shape,) if isinstance(input_shape, int) else input_shape
        if (not isinstance(shape, (tuple, list, torch.Size)) or not shape
                or any(isinstance(n, bool) or not isinstance(n, int) or n <= 0 for n in shape)):
            raise ValueError(f"input_shape must be a tuple of positive ints such as (1, 8), got {input_shape!r}.")
        config = getattr(model, "config", None)
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        is_token_model = getattr(config, "vocab_size", None) is not None
        inputs = (torch.zeros(tuple(shape), dtype=torch.long, device=device) if is_token_model
                  else torch.zeros(tuple(shape), device=device))
    with torch.inference_mode(), trace(model, attentions=False, hidden_states=False, shapes=True) as recorded:
        if isinstance(inputs, Mapping):
            model(**inputs)
        elif isinstance(inputs, (tuple, list)):
            model(*inputs)
        else:
            model(inputs)
    return recorded


def _graph(model_or_trace: Any, input_shape: Any, inputs: Any, depth: int | None, direction: str,
           show_shapes: bool, collapse_repeats: bool) -> ArchitectureGraph:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}.")
    return build_graph(_traced(model_or_trace, input_shape, inputs), depth=depth, show_shapes=show_shapes,
                       collapse_repeats=collapse_repeats)


# mermaid -----------------------------------------------------------------------------------------------
def mermaid_escape(text: str) -> str:
    """Text safe inside a quoted mermaid label: quotes, angle brackets, #, & and backticks as entity codes."""
    return "".join(_MERMAID_ENTITIES.get(ch, ch) for ch in text.replace("\n", " "))


def _mermaid_label(lines: list[str]) -> str:
    return '"' + "<br/>".join(mermaid_escape(line) for line in lines if line) + '"'


def _mermaid_lines(item: Cluster | Node, indent: str, out: list[str]) -> None:
    if isinstance(item, Node):
        out.append(f"{indent}{item.id}[{_mermaid_label(item.lines)}]")
        return
    out.append(f"{indent}subgraph {item.id}[{_mermaid_label([item.label])}]")
    for child in item.children:
        _mermaid_lines(child, indent + "  ", out)
    out.append(f"{indent}end")


def mermaid_init(font_size: int) -> str:
    """Mermaid's init directive setting the diagram's text size (px), understood by every mermaid since 8.x."""
    if isinstance(font_size, bool) or not isinstance(font_size, int) or font_size < 1:
        raise ValueError(f"font_size must be a positive int (pixels), got {font_size!r}.")
    return f'%%{{init: {{"themeVariables": {{"fontSize": "{font_size}px"}}}}}}%%'


def to_mermaid(model_or_trace: Trace | nn.Module, input_shape: tuple[int, ...] | None = None, inputs: Any = None,
               depth: int | None = 3, direction: str = "LR", show_shapes: bool = True,
               collapse_repeats: bool = True, font_size: int | None = None) -> MermaidDiagram:
    """A mermaid flowchart: containers as subgraphs, repeated siblings as `Name x N`, leaves with (in) → (out).

    Give a Trace, or a model with input_shape (token ids of zeros for a BERT) or inputs (a tensor, a tuple of
    positional arguments, or a dict of keyword arguments). depth: how many levels of modules to open (None: all).
    font_size (px) adds an init directive: front ends shrink a diagram wider than the page, so a readable one is
    narrow too (direction="TB" stacks the modules).
    """
    graph = _graph(model_or_trace, input_shape, inputs, depth, direction, show_shapes, collapse_repeats)
    out = [mermaid_init(font_size)] if font_size is not None else []
    out.append(f"flowchart {direction}")
    out.append(f"  {graph.input.id}([{_mermaid_label(graph.input.lines)}])")
    _mermaid_lines(graph.root, "  ", out)
    out.append(f"  {graph.output.id}([{_mermaid_label(graph.output.lines)}])")
    out.extend(f"  {a} --> {b}" for a, b in graph.edges)
    return MermaidDiagram("\n".join(out) + "\n")


# graphviz ----------------------------------------------------------------------------------------------
def _require_graphviz() -> None:
    try:
        import graphviz  # noqa: F401  (importing it is the check)
    except ImportError as error:
        raise ImportError("to_graphviz needs the `graphviz` Python package: pip install 'bertviz_lab[lab]' "
                          "(or pip install graphviz); to_mermaid needs nothing.") from error
    if shutil.which("dot") is None:
        raise FileNotFoundError("Graphviz's `dot` program was not found on PATH: install Graphviz (Debian/Ubuntu: "
                                "apt-get install graphviz; macOS: brew install graphviz; conda install graphviz). "
                                "The pip package `graphviz` is only the Python binding. to_mermaid needs nothing.")


def _dot_label(lines: list[str]) -> str:
    import graphviz

    label: str = graphviz.nohtml("\\n".join(line.replace("\\", "\\\\") for line in lines if line))
    return label


def _add_cluster(graph: Any, cluster: Cluster, font_size: float) -> None:
    with graph.subgraph(name=f"cluster_{cluster.id}") as sub:
        sub.attr(label=_dot_label([cluster.label]), style="rounded", color=GRAPHVIZ_COLORS["cluster"],
                 fontname=GRAPHVIZ_FONT_NAME, fontsize=f"{font_size:g}")
        for child in cluster.children:
            if isinstance(child, Node):
                sub.node(child.id, _dot_label(child.lines))
            else:
                _add_cluster(sub, child, font_size)


def to_graphviz(model_or_trace: Trace | nn.Module, input_shape: tuple[int, ...] | None = None, inputs: Any = None,
                depth: int | None = 3, direction: str = "LR", show_shapes: bool = True,
                collapse_repeats: bool = True, check_dot: bool = True,
                font_size: float | None = None) -> graphviz.Digraph:
    """The same graph as to_mermaid as a graphviz.Digraph (clusters for containers); notebooks show it as SVG.

    check_dot=False builds the Digraph even where Graphviz's `dot` program is missing (it cannot render then).
    font_size: the text size of every label in points (default 10 in boxes, 11 on clusters). Every label is in
    DejaVu Sans, the font the widgets ship, so an exported PNG draws the same text as the SVG.
    """
    if check_dot:
        _require_graphviz()  # the package and `dot`, each refused with its install line
    import graphviz
    if font_size is not None and (isinstance(font_size, bool) or not isinstance(font_size, (int, float))
                                  or not font_size > 0):
        raise ValueError(f"font_size must be a positive number (points), got {font_size!r}.")
    graph = _graph(model_or_trace, input_shape, inputs, depth, direction, show_shapes, collapse_repeats)
    colors = GRAPHVIZ_COLORS
    dot = graphviz.Digraph(name=graph.root.label.split(":")[0].strip() or "model",
                           graph_attr={"rankdir": "TB" if direction == "TD" else direction,
                                       "fontname": GRAPHVIZ_FONT_NAME},
                           node_attr={"shape": "box", "style": "rounded,filled", "fillcolor": colors["node_fill"],
                                      "color": colors["node_border"],
                                      "fontname": GRAPHVIZ_FONT_NAME, "fontsize": f"{font_size or 10:g}"},
                           edge_attr={"color": colors["edge"], "fontname": GRAPHVIZ_FONT_NAME})
    for node in (graph.input, graph.output):
        dot.node(node.id, _dot_label(node.lines), shape="oval", fillcolor=colors["io_fill"])
    _add_cluster(dot, graph.root, font_size or 11)
    for a, b in graph.edges:
        dot.edge(a, b)
    return dot
