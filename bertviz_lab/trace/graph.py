"""The architecture graph both diagram formats draw: module calls of one forward pass -> nested clusters, leaf
nodes with shapes, `Name x N` groups of repeated siblings, and data-flow edges between them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from bertviz_lab.trace.records import MODEL_INPUT
from bertviz_lab.trace.shapes import format_specs

if TYPE_CHECKING:
    from bertviz_lab.trace.hooks import Trace
    from bertviz_lab.trace.records import Call


@dataclass
class Node:
    """A box: a leaf module (or a group of identical ones, or one drawn without its insides), or input/output."""

    id: str
    lines: list[str]  # label lines, plain text (renderers escape them)
    kind: str = "module"  # "module", "input" or "output"


@dataclass
class Cluster:
    """A container module drawn as a box around its children."""

    id: str
    label: str
    children: list[Union["Cluster", Node]] = field(default_factory=list)


@dataclass
class ArchitectureGraph:
    """Everything a renderer needs: the root cluster, input and output nodes, edges between node ids."""

    root: Cluster
    input: Node
    output: Node
    edges: list[tuple[str, str]]


@dataclass
class _Item:
    """One call with the calls it made, as a tree."""

    call: "Call"
    children: list["_Item"] = field(default_factory=list)
    signature: tuple[object, ...] = ()  # (class name, the children's signatures), compared for equality


def _tree(calls: list["Call"]) -> list[_Item]:
    items = {c.index: _Item(c) for c in calls}
    roots: list[_Item] = []
    for call in calls:
        parent = items.get(call.parent) if call.parent is not None else None
        (parent.children if parent is not None else roots).append(items[call.index])
    for item in reversed(list(items.values())):  # children before parents: signatures bottom-up
        item.signature = (item.call.class_name, tuple(child.signature for child in item.children))
    return roots


def _relative_name(item: _Item, parent: _Item | None) -> str:
    path, base = item.call.path, parent.call.path if parent is not None else ""
    return path[len(base) + 1:] if base and path.startswith(base + ".") else (path or item.call.class_name)


def _group_name(names: list[str]) -> str:
    """layer.0-11 for numbered siblings, else the names (or first ... last when many)."""
    found = [re.fullmatch(r"(.*?)(\d+)", n) for n in names]
    numbered = [m for m in found if m is not None]
    if len(names) > 1 and len(numbered) == len(names) and len({m.group(1) for m in numbered}) == 1:
        return f"{numbered[0].group(1)}{numbered[0].group(2)}-{numbered[-1].group(2)}"
    return ", ".join(names) if len(names) <= 3 else f"{names[0]} ... {names[-1]}"


def _shape_text(call: "Call") -> str:
    outputs = format_specs(call.outputs) if call.outputs is not None else "?"
    return f"{format_specs(call.inputs)} → {outputs}"


def _subtree(item: _Item) -> set[int]:
    """Call indices of an item and everything it called."""
    return {item.call.index}.union(*(_subtree(child) for child in item.children))


def _group_shapes(items: list[_Item]) -> str:
    """One line when all members agree; first input to last output for a chain; else each distinct one."""
    texts = [_shape_text(i.call) for i in items]
    if len(set(texts)) == 1:
        return texts[0]
    if all(_subtree(prev) & set(item.call.input_sources) for prev, item in zip(items, items[1:])):
        outputs = format_specs(items[-1].call.outputs) if items[-1].call.outputs is not None else "?"
        return f"{format_specs(items[0].call.inputs)} → {outputs}"
    return "; ".join(dict.fromkeys(texts))


class _Builder:
    """Turns the call tree into clusters and nodes, remembering which node draws each call."""

    def __init__(self, calls: list["Call"], depth: int | None, show_shapes: bool, collapse_repeats: bool) -> None:
        self.calls = {c.index: c for c in calls}
        self.depth, self.show_shapes, self.collapse = depth, show_shapes, collapse_repeats
        self.node_of: dict[int, str] = {}  # call index -> id of the leaf node drawing it
        self.count = 0

    def new_id(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def groups(self, children: list[_Item]) -> list[list[_Item]]:
        out: list[list[_Item]] = []
        for child in children:
            if self.collapse and out and out[-1][0].signature == child.signature:
                out[-1].append(child)
            else:
                out.append([child])
        return out

    def emit(self, group: list[_Item], parent: _Item | None, level: int) -> Cluster | Node:
        first, n = group[0], len(group)
        times = f" x {n}" if n > 1 else ""
        name = _group_name([_relative_name(i, parent) for i in group])
        if first.children and (self.depth is None or level < self.depth):
            cluster = Cluster(self.new_id("s"), f"{name}: {first.call.class_name}{times}")
            for sub in self.groups(first.children):
                cluster.children.append(self.emit(sub, first, level + 1))
            for other in group[1:]:
                self.alias(other, first)
            return cluster
        lines = [f"{first.call.class_name}{times}"] + ([name] if name != first.call.class_name else [])
        if self.show_shapes:
            lines.append(_group_shapes(group))
        node = Node(self.new_id("n"), lines)
        for item in group:
            self.assign(item, node.id)
        return node

    def assign(self, item: _Item, node_id: str) -> None:
        self.node_of[item.call.index] = node_id
        for child in item.children:
            self.assign(child, node_id)

    def alias(self, other: _Item, first: _Item) -> None:
        """Map a repeated instance onto the nodes drawn for the first one (same structure, walked in step)."""
        if first.call.index in self.node_of:
            self.node_of[other.call.index] = self.node_of[first.call.index]
        for a, b in zip(other.children, first.children):
            self.alias(a, b)

    def node_or_last_leaf(self, index: int) -> str | None:
        """The leaf drawing a call; for a call drawn as a cluster, the last leaf that ran inside it."""
        if index in self.node_of:
            return self.node_of[index]
        best = None
        for other in self.calls.values():
            if other.index > index and self._inside(other, index) and other.index in self.node_of:
                best = self.node_of[other.index]
        return best

    def _inside(self, call: "Call", ancestor: int) -> bool:
        while call.parent is not None:
            if call.parent == ancestor:
                return True
            call = self.calls[call.parent]
        return False


def build_graph(trace: "Trace", *, depth: int | None = 3, show_shapes: bool = True, collapse_repeats: bool = True,
                pass_index: int = 0) -> ArchitectureGraph:
    """The graph of one traced forward pass (the first by default)."""
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be a positive int or None (everything), got {depth!r}.")
    calls = [c for c in trace.calls if c.pass_index == pass_index]
    if not calls:
        raise ValueError(f"the trace holds no module calls for forward pass {pass_index}: trace with shapes=True "
                         f"and run a forward pass inside the block.")
    builder = _Builder(calls, depth, show_shapes, collapse_repeats)
    roots = _tree(calls)
    if len(roots) == 1 and roots[0].children:
        top = roots[0]
        root = Cluster("s0", top.call.class_name if not top.call.path else f"{top.call.path}: {top.call.class_name}")
        children, parent = top.children, top
    else:
        top, parent, children = None, None, roots
        root = Cluster("s0", trace.model_class)
    for group in builder.groups(children):
        root.children.append(builder.emit(group, parent, 1))

    first_call, last_call = (top.call, top.call) if top is not None else (roots[0].call, roots[-1].call)
    input_lines = ["input", *(f"{s.name}: {s}" for s in first_call.inputs)] if show_shapes else ["input"]
    inputs = Node("model_input", input_lines, "input")
    output_lines = ["output", *(f"{s.name}: {s}" for s in last_call.outputs or ())] if show_shapes else ["output"]
    outputs = Node("model_output", output_lines, "output")

    edges: dict[tuple[str, str], None] = {}
    previous = inputs.id
    for call in calls:
        node = builder.node_of.get(call.index)
        parent_node = builder.node_of.get(call.parent) if call.parent is not None else None
        if node is None or node == parent_node:
            continue  # a cluster, or a call inside a leaf that is already drawn
        sources: list[str] = []
        for source in call.input_sources:
            if source == MODEL_INPUT:
                sources.append(inputs.id)
            elif source is not None and (found := builder.node_or_last_leaf(source)) is not None:
                sources.append(found)
        for start in sources or [previous]:
            if start != node:
                edges[(start, node)] = None
        previous = node
    finals = [builder.node_or_last_leaf(s) if s not in (None, MODEL_INPUT) else None
              for s in last_call.output_sources] if top is not None else []
    for start in [f for f in finals if f is not None] or [previous]:
        edges[(start, outputs.id)] = None
    return ArchitectureGraph(root, inputs, outputs, list(edges))
