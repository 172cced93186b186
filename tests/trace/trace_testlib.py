"""Shared helpers of the trace tests: the tiny config's trace sizes, padded batches, a hook census, a mermaid parser."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch
from tiny_models import tiny_config
from torch import nn

from bertviz_lab.model import BERTConfig

# Overrides of the shared tiny config: 3 layers for rollout, 4 heads of 8 for head selection, no dropout.
TRACE_SIZES = dict(hidden_size=32, num_hidden_layers=3, intermediate_size=64, hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0)
HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs",
              "_forward_hooks_always_called", "_backward_hooks", "_backward_pre_hooks")


def trace_config(**overrides) -> BERTConfig:
    """The shared tiny config at the trace sizes."""
    return tiny_config(**{**TRACE_SIZES, **overrides})


def hook_count(model: nn.Module) -> int:
    """Every forward/backward hook registered on any module of the model."""
    return sum(len(getattr(m, name, {})) for m in model.modules() for name in HOOK_DICTS)


def padded_batch(lengths=(8, 5, 3), vocab_size: int = 100, seed: int = 0):
    """(input_ids, attention_mask, token_type_ids) with [CLS]=1 ... [SEP]=2 rows padded with 0."""
    generator = torch.Generator().manual_seed(seed)
    T = max(lengths)
    ids = torch.randint(5, vocab_size, (len(lengths), T), generator=generator)
    mask = torch.zeros(len(lengths), T, dtype=torch.long)
    types = torch.zeros(len(lengths), T, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        ids[row, 0], ids[row, n - 1] = 1, 2
        types[row, n // 2:n] = 1
    return ids.masked_fill(mask == 0, 0), mask, types


# mermaid, read back --------------------------------------------------------------------------------------
_LABEL = r'"([^"]*)"'
_PATTERNS = {
    "header": re.compile(r"flowchart (LR|RL|TB|TD|BT)"),
    "subgraph": re.compile(rf"subgraph ([A-Za-z_][\w]*)\[{_LABEL}\]"),
    "end": re.compile(r"end"),
    "stadium": re.compile(rf"([A-Za-z_][\w]*)\(\[{_LABEL}\]\)"),
    "box": re.compile(rf"([A-Za-z_][\w]*)\[{_LABEL}\]"),
    "edge": re.compile(r"([A-Za-z_][\w]*) --> ([A-Za-z_][\w]*)"),
}
_ENTITIES = {"#quot;": '"', "#lt;": "<", "#gt;": ">", "#35;": "#", "#96;": "`", "#amp;": "&"}


def unescape(label: str) -> str:
    """Mermaid label text back to plain text, <br/> as newlines."""
    text = label.replace("<br/>", "\n")
    for code, char in _ENTITIES.items():
        text = text.replace(code, char)
    return text


@dataclass
class Mermaid:
    """A flowchart read back: nodes and subgraphs by id (label, enclosing subgraphs), and edges."""

    direction: str
    nodes: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    subgraphs: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)

    def node_labels(self, within: str | None = None) -> list[str]:
        """Labels of nodes, or only those inside the subgraph whose label starts with `within`."""
        ids = {i for i, (label, _) in self.subgraphs.items() if within and label.startswith(within)}
        return [label for label, parents in self.nodes.values() if within is None or ids & set(parents)]

    def node_id(self, *parts: str) -> str:
        """The one node whose label contains every part."""
        found = [i for i, (label, _) in self.nodes.items() if all(p in label for p in parts)]
        assert len(found) == 1, (parts, found)
        return found[0]


def parse_mermaid(text: str) -> Mermaid:
    """Parse our mermaid flowchart subset strictly; any line it cannot read, or any inconsistency, fails."""
    lines = [line.strip() for line in text.strip().splitlines()]
    header = _PATTERNS["header"].fullmatch(lines[0])
    assert header, f"bad header {lines[0]!r}"
    chart, stack = Mermaid(header.group(1)), []
    for number, line in enumerate(lines[1:], start=2):
        assert line, f"blank line {number}"
        if m := _PATTERNS["subgraph"].fullmatch(line):
            assert m.group(1) not in chart.subgraphs and m.group(1) not in chart.nodes, f"duplicate id line {number}"
            chart.subgraphs[m.group(1)] = (unescape(m.group(2)), tuple(stack))
            stack.append(m.group(1))
        elif _PATTERNS["end"].fullmatch(line):
            assert stack, f"'end' without subgraph on line {number}"
            stack.pop()
        elif m := _PATTERNS["stadium"].fullmatch(line) or _PATTERNS["box"].fullmatch(line):
            assert m.group(1) not in chart.nodes and m.group(1) not in chart.subgraphs, f"duplicate id line {number}"
            chart.nodes[m.group(1)] = (unescape(m.group(2)), tuple(stack))
        elif m := _PATTERNS["edge"].fullmatch(line):
            chart.edges.append((m.group(1), m.group(2)))
        else:
            raise AssertionError(f"unparseable mermaid line {number}: {line!r}")
        if "[" in line:  # labels: no raw angle brackets except our <br/>, no quotes inside
            label = line[line.index('"') + 1: line.rindex('"')]
            bare = label.replace("<br/>", "")
            assert '"' not in label and "<" not in bare and ">" not in bare, line
    assert not stack, f"unclosed subgraphs {stack}"
    reserved = {"end", "graph", "subgraph", "flowchart"}
    assert not reserved & (set(chart.nodes) | set(chart.subgraphs)), "a reserved word used as an id"
    for a, b in chart.edges:
        assert a in chart.nodes and b in chart.nodes, f"edge {a} --> {b} to an undefined node"
        assert a != b, f"self edge on {a}"
    assert len(set(chart.edges)) == len(chart.edges), "duplicate edges"
    return chart


def reachable(chart: Mermaid, start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        here = todo.pop()
        for a, b in chart.edges:
            if a == here and b not in seen:
                seen.add(b)
                todo.append(b)
    return seen
