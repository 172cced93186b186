"""Architecture diagrams: the mermaid chart of bert-base pretraining read back and checked, graphviz SVG, notebook
mime bundles, escaping, options and errors."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn
from trace_testlib import TRACE_SIZES, parse_mermaid, reachable

from bertviz_lab.model import (
    BERTForPreTraining,
    bert_for_pre_training_base,
    create_bert_model,
)
from bertviz_lab.trace import MermaidDiagram, to_graphviz, to_mermaid, trace
from bertviz_lab.trace.diagram import mermaid_escape


@pytest.fixture(scope="module")
def base_trace():
    """bert-base with both pretraining heads, traced once on a (1, 8) input."""
    torch.manual_seed(0)
    model = bert_for_pre_training_base().eval()
    with torch.inference_mode(), trace(model, attentions=False) as t:
        model(torch.randint(1000, 2000, (1, 8)))
    return t


def test_mermaid_of_bert_base_has_lucids_structure(base_trace):
    diagram = to_mermaid(base_trace)
    chart = parse_mermaid(str(diagram))
    assert chart.direction == "LR"
    sub = {label.split(":")[0]: (sid, parents) for sid, (label, parents) in chart.subgraphs.items()}
    assert {"BERTForPreTraining", "bert", "embeddings", "encoder", "pooler", "cls", "predictions"} <= set(sub)
    assert sub["embeddings"][1][-1] == sub["bert"][0] and sub["predictions"][1][-1] == sub["cls"][0]  # nesting

    embeddings = chart.node_labels(within="embeddings")
    assert any("Embedding x 3" in n and "(1,8) → (1,8,768)" in n for n in embeddings)
    assert any(n.startswith("LayerNorm") for n in embeddings) and any(n.startswith("Dropout") for n in embeddings)
    assert [n for n in chart.node_labels(within="encoder") if "BERTLayer x 12" in n and "→ (1,8,768)" in n]
    assert sorted(n.split("\n")[0] for n in chart.node_labels(within="pooler")) == ["Linear", "Tanh"]
    heads = chart.node_labels(within="predictions")
    assert any(n.startswith("BERTPredictionHeadTransform") for n in heads)
    assert any(n.startswith("Linear") and "decoder" in n and "(1,8,768) → (1,8,30522)" in n for n in heads)
    nsp = chart.node_id("Linear", "seq_relationship")
    assert "(1,768) → (1,2)" in chart.nodes[nsp][0]

    output = chart.node_id("output")
    assert "(1,8,30522)" in chart.nodes[output][0] and "(1,2)" in chart.nodes[output][0]
    assert "input_ids: (1,8)" in chart.nodes[chart.node_id("input")][0]
    decoder = chart.node_id("decoder")
    embedding = chart.node_id("Embedding x 3")
    assert {(decoder, output), (nsp, output), (chart.node_id("input"), embedding)} <= set(chart.edges)
    assert (chart.node_id("Tanh"), nsp) in chart.edges  # NSP reads the pooled state, the MLM head the sequence
    assert (chart.node_id("BERTLayer x 12"), chart.node_id("BERTPredictionHeadTransform")) in chart.edges
    assert reachable(chart, chart.node_id("input")) == set(chart.nodes)  # connected from the input on


def test_mermaid_mime_bundle_and_text(base_trace):
    diagram = to_mermaid(base_trace, direction="TB", depth=2)
    bundle = diagram._repr_mimebundle_()
    assert set(bundle) == {"text/vnd.mermaid", "text/markdown", "text/plain"}
    assert bundle["text/vnd.mermaid"] == str(diagram) == bundle["text/plain"] == diagram.source
    assert bundle["text/markdown"] == f"```mermaid\n{diagram.source}\n```"
    chart = parse_mermaid(diagram.source)
    assert chart.direction == "TB"
    assert chart.node_id("BERTEncoder") and not [n for n in chart.nodes.values() if "BERTLayer" in n[0]]


@pytest.mark.needs_program("dot")
def test_graphviz_renders_svg(base_trace):
    dot = to_graphviz(base_trace)
    assert "cluster_" in dot.source and "BERTLayer x 12" in dot.source
    svg = dot.pipe(format="svg").decode()
    assert "<svg" in svg and "BERTLayer x 12" in svg and "(1,8) → (1,8,768)" in svg
    assert svg.count('class="cluster"') == 7  # the model, bert, embeddings, encoder, pooler, cls, predictions


def test_graphviz_names_only_the_shipped_font_and_colours_that_read_in_both_themes(base_trace):
    """Every label in DejaVu Sans (the font PNG export ships, so it draws the same text, not a serif fallback); black
    ink on light node fills; edges and cluster frames in mid tones that read on white and on #111."""
    from bertviz_lab.widgets.figures.contrast import contrast_ratio
    from bertviz_lab.widgets.figures.export import SANS

    source = to_graphviz(base_trace, check_dot=False).source
    assert "Helvetica" not in source and source.count(f'fontname="{SANS}"') >= 3  # graph, nodes, edges, clusters
    fills = re.findall(r'fillcolor="(#[0-9a-f]{6})"', source)
    assert fills and all(contrast_ratio("#000000", fill) >= 4.5 for fill in fills)  # nodes and input/output ovals
    edge = re.search(r'edge \[color="(#[0-9a-f]{6})"', source).group(1)
    frames = re.findall(r'\bcolor="(#[0-9a-f]{6})"', source.split("edge [")[1])  # cluster frames after the defaults
    assert frames and all(contrast_ratio(colour, ground) >= 3 for colour in {edge, *frames}
                          for ground in ("#ffffff", "#111111"))


@pytest.mark.needs_program("dot")
def test_graphviz_svg_text_is_in_the_shipped_family_only(base_trace):
    svg = to_graphviz(base_trace, depth=2).pipe(format="svg").decode()
    assert set(re.findall(r'font-family="([^"]*)"', svg)) == {"DejaVu Sans"}


def test_font_size_options(base_trace):
    """A font size for the rendered text: mermaid's init directive (the first line), graphviz's fontsize."""
    diagram = to_mermaid(base_trace, direction="TB", depth=2, font_size=16)
    first, rest = diagram.source.split("\n", 1)
    assert first == '%%{init: {"themeVariables": {"fontSize": "16px"}}}%%'
    assert rest == to_mermaid(base_trace, direction="TB", depth=2).source  # the chart itself is unchanged
    with pytest.raises(ValueError, match="font_size"):
        to_mermaid(base_trace, font_size=0)
    dot = to_graphviz(base_trace, font_size=14, check_dot=False).source
    assert "fontsize=14" in dot and "fontsize=10" not in dot and "fontsize=11" not in dot
    assert "fontsize=10" in to_graphviz(base_trace, check_dot=False).source  # the default as before
    with pytest.raises(ValueError, match="font_size"):
        to_graphviz(base_trace, font_size=-1, check_dot=False)


def test_missing_dot_says_to_install_graphviz(base_trace, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="install Graphviz"):
        to_graphviz(base_trace)
    assert "digraph" in to_graphviz(base_trace, check_dot=False).source  # the source can still be built


def test_depth_collapse_and_shapes_options(tiny_config):
    torch.manual_seed(0)
    model = BERTForPreTraining(tiny_config(**TRACE_SIZES)).eval()
    everything = parse_mermaid(str(to_mermaid(model, input_shape=(2, 5), depth=None)))
    labels = [s for s, _ in everything.subgraphs.values()]
    assert everything.node_id("qkv") and "intermediate: BERTIntermediate" in labels
    outputs = [sid for sid, (label, _) in everything.subgraphs.items() if label == "output: BERTOutput"]
    ffn_out = outputs[1]  # layer 0: attention.output first, then the feed-forward's output
    last_norm = next(i for i, (label, parents) in everything.nodes.items()
                     if label.startswith("LayerNorm") and parents[-1] == ffn_out)
    assert (last_norm, everything.node_id("qkv")) in everything.edges  # layer i's output feeds layer i + 1
    layer = [label for label, _ in everything.subgraphs.values() if "BERTLayer x 3" in label]
    assert layer == ["layer.0-2: BERTLayer x 3"]
    apart = parse_mermaid(str(to_mermaid(model, input_shape=(2, 5), collapse_repeats=False)))
    assert sum(label.startswith("BERTLayer\n") for label, _ in apart.nodes.values()) == 3
    assert sum(label.startswith("Embedding\n") for label, _ in apart.nodes.values()) == 3
    plain = str(to_mermaid(model, input_shape=(2, 5), show_shapes=False))
    parse_mermaid(plain)
    assert "→" not in plain and "(2,5)" not in plain
    with pytest.raises(ValueError, match="depth must be"):
        to_mermaid(model, input_shape=(1, 4), depth=0)
    with pytest.raises(ValueError, match="direction must be one of"):
        to_mermaid(model, input_shape=(1, 4), direction="sideways")
    with pytest.raises(ValueError, match="input_shape=.*or inputs="):
        to_mermaid(model)
    with pytest.raises(ValueError, match="input_shape must be"):
        to_mermaid(model, input_shape=(1, -4))
    with pytest.raises(TypeError, match="Trace or a torch.nn.Module"):
        to_mermaid("bert")


def test_dict_outputs_keyword_inputs_and_plain_modules():
    torch.manual_seed(0)
    model = create_bert_model(vocab_size=100, max_seq_length=16, d_model=32, num_heads=4, d_ff=64, num_layers=2)
    ids = torch.randint(0, 100, (2, 6))
    inputs = {"input_ids": ids, "segment_ids": torch.zeros_like(ids)}
    chart = parse_mermaid(str(to_mermaid(model.eval(), inputs=inputs)))
    output = chart.nodes[chart.node_id("output")][0]
    assert "mlm_logits: (2,6,100)" in output and "pooled_output: (2,32)" in output
    assert "segment_ids: (2,6)" in chart.nodes[chart.node_id("input")][0]
    assert "Embedding x 2" in str(to_mermaid(model, inputs=ids))  # sinusoidal positions: no position Embedding

    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    chart = parse_mermaid(str(to_mermaid(mlp, input_shape=(3, 4))))
    assert chart.node_id("(3,4) → (3,8)") and chart.node_id("(3,8) → (3,2)")
    assert len(chart.edges) == 6  # a chain: input, five layers, output
    single = parse_mermaid(str(to_mermaid(nn.Linear(4, 2), inputs=torch.zeros(1, 4))))
    assert set(chart.nodes) >= {"model_input", "model_output"} and len(single.edges) == 2


def odd_model() -> nn.Module:
    """A model with a class name full of characters that mermaid and SVG must escape."""
    weird = type('Odd"<Name>#&`', (nn.Module,), {"forward": lambda self, x: x * 2})
    return nn.Sequential(nn.Linear(2, 2), weird())


def test_labels_are_escaped_for_mermaid():
    chart = parse_mermaid(str(to_mermaid(odd_model(), input_shape=(1, 2))))
    assert chart.node_id('Odd"<Name>#&`')  # read back unescaped
    assert mermaid_escape('a "b" <c> #d & `e`') == "a #quot;b#quot; #lt;c#gt; #35;d #amp; #96;e#96;"


@pytest.mark.needs_program("dot")
def test_labels_are_escaped_for_graphviz():
    svg = to_graphviz(odd_model(), input_shape=(1, 2)).pipe(format="svg").decode()
    assert "Odd&quot;&lt;Name&gt;#&amp;`" in svg


def test_a_trace_without_calls_cannot_be_drawn(tiny_bert, batch):
    with trace(tiny_bert, shapes=False) as t:
        tiny_bert(batch[0])
    with pytest.raises(ValueError, match="shapes=True"):
        to_mermaid(t)
    with pytest.raises(ValueError, match="input_shape and inputs are for a model"):
        to_mermaid(t, input_shape=(1, 2))
    assert isinstance(to_mermaid(tiny_bert, input_shape=(1, 3)), MermaidDiagram)
