"""ArchitecturePanel (mermaid / graphviz diagram, depth, collapse, shapes, folding parameter table, export) and
DevicePicker (exactly the available devices, disabled ones with the reason, moves and callbacks, errors, export)."""

from __future__ import annotations

import shutil
import struct
import xml.etree.ElementTree as ET

import graphviz
import pytest
import torch

from bertviz_lab.device import available_devices, describe_devices
from bertviz_lab.trace import MermaidDiagram
from bertviz_lab.widgets import ArchitecturePanel, DevicePicker
from bertviz_lab.widgets.figures.contrast import contrast_ratio
from bertviz_lab.widgets.panels.architecture import example_inputs
from bertviz_lab.widgets.panels.device_picker import format_bytes, model_memory_bytes
from bertviz_lab.widgets.views.front_end import all_css, esm

SVG = "{http://www.w3.org/2000/svg}"


# ArchitecturePanel ---------------------------------------------------------------------------------------
@pytest.fixture
def architecture(pretraining_model) -> ArchitecturePanel:
    return ArchitecturePanel(pretraining_model, renderer="mermaid")


def test_mermaid_diagram_of_a_tiny_pretraining_bert(architecture):
    diagram = architecture.diagram()
    assert isinstance(diagram, MermaidDiagram)
    text = str(diagram)
    init, flowchart = text.split("\n", 1)
    assert init == '%%{init: {"themeVariables": {"fontSize": "16px"}}}%%'  # readable text as rendered
    assert flowchart.startswith("flowchart TB")  # top to bottom: narrow enough not to be shrunk
    for part in ("BERTForPreTraining", "embeddings: BERTEmbeddings", "encoder: BERTEncoder", "BERTLayer x 3",
                 "layer.0-2", "pooler: BERTPooler", "cls: BERTPreTrainingHeads", "predictions", "seq_relationship",
                 "(1,8) → (1,8,128)", "(1,8,128) → (1,8,30522)", "(1,128) → (1,2)", "-->"):
        assert part in text, part
    assert architecture.inputs["input_ids"].shape == (1, 8)


def test_collapse_depth_and_shapes_toggles_change_the_diagram(architecture):
    collapsed = str(architecture.diagram())
    architecture.collapse.value = False
    expanded = str(architecture.diagram())
    assert "BERTLayer x 3" not in expanded
    assert all(f"BERTLayer<br/>layer.{i}<br/>" in expanded for i in range(3))
    architecture.collapse.value = True
    assert str(architecture.diagram()) == collapsed
    architecture.depth.value = 1
    shallow = str(architecture.diagram())
    assert "BERTLayer" not in shallow and len(shallow.splitlines()) < len(collapsed.splitlines())
    architecture.depth.value = 3
    architecture.shapes.value = False
    assert "(1,8,128)" not in str(architecture.diagram()) and "BERTLayer x 3" in str(architecture.diagram())


@pytest.mark.needs_program("dot")
def test_graphviz_renderer(architecture):
    architecture.renderer.value = "graphviz"
    diagram = architecture.diagram()
    assert isinstance(diagram, graphviz.Digraph)
    assert "BERTLayer x 3" in diagram.source and "BERTForPreTraining" in diagram.source
    architecture.collapse.value = False
    assert "BERTLayer x 3" not in architecture.diagram().source
    with pytest.raises(ValueError, match="renderer"):
        ArchitecturePanel(architecture.model, renderer="svg")


def test_parameter_table_is_collapsed_to_the_top_levels(architecture, pretraining_model):
    table = architecture.table.value
    total = sum(p.numel() for p in pretraining_model.parameters())
    assert f"{total:,}" in table and "BERTLayer" in table and "(1,8,30522)" in table
    root = ET.fromstring(table.replace("<br/>", " "))
    groups = list(root.iter("details"))
    assert groups and not [g for g in groups if "open" in g.attrib]  # every module with submodules folds
    hidden = {id(row) for group in groups for row in group.iter() if row is not group[0]}
    visible = [row for row in root.iter() if "bvl-param-row" in (row.get("class") or "") and id(row) not in hidden]
    names = [next(span for span in row.iter("span")).text for row in visible]
    assert names == ["BERTForPreTraining", "bert", "cls"]  # the model and its top-level modules
    rows = architecture.trace.summary().rows
    assert len([r for r in root.iter() if "bvl-param-row" in (r.get("class") or "")]) == len(rows)
    assert [int(g.get("data-depth")) for g in groups if g.get("data-depth") == "1"] == [1, 1]
    assert "<script" not in table


def test_static_fallback_draws_graphviz_or_shows_the_mermaid_source(architecture, pretraining_model, monkeypatch):
    static = architecture._repr_mimebundle_()["text/html"]
    assert static == architecture.static_html() and "<script" not in static
    total = sum(p.numel() for p in pretraining_model.parameters())
    assert f"{total:,}" in static and "bvl-param-table" in static
    monkeypatch.setattr(shutil, "which", lambda name: None)
    architecture._svg_cache.clear()
    without_dot = architecture.static_html()
    assert "install Graphviz" in without_dot and "<pre class='bvl-mermaid-text'>%%{init" in without_dot
    assert "class='mermaid'" not in without_dot  # nothing a page's mermaid loader would fetch a script for
    assert "&lt;br/&gt;" in without_dot
    with pytest.raises(FileNotFoundError, match="Graphviz"):
        architecture.to_svg()


@pytest.mark.needs_program("dot")
def test_graphviz_svg_export_and_view(pretraining_model, tmp_path):
    panel = ArchitecturePanel(pretraining_model)
    assert panel.renderer.value == "graphviz"  # the default where dot exists: fit, zoom and pan
    assert panel.graph_view.renderer == "graphviz" and panel.diagram_output.layout.display == "none"
    view = panel.graph_view
    assert view.svg.startswith("<svg") and "BERTLayer x 3" in view.svg and 'viewBox="' in view.svg
    assert (view.zoom, view.font_size, view.min_font_px) == (1.0, 14.0, 12.0)
    svg = panel.to_svg()
    assert view.svg == svg  # the live view shows the figure the static copy and exports hold
    root = ET.fromstring(svg)
    assert root.get("class").split() == ["bvl-fig", "bvl-architecture"] and root[0].get("class") == "bvl-ground"
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert texts[0] == "BERTForPreTraining · depth 3 · repeats collapsed · shapes"
    assert "BERTLayer x 3" in texts and any("(1,8,128) → (1,8,30522)" in t for t in texts)
    labels = [t for t in root.iter(f"{SVG}text") if t.get("font-family")]
    assert {float(t.get("font-size")) for t in labels} == {14.0}  # every label in 14 pt: 12 px or more on screen
    # only the family the package ships, so a PNG draws the same text (no serif fallback for Helvetica)
    assert {t.get("font-family") for t in labels} == {"DejaVu Sans"} and "Helvetica" not in svg
    assert {t.get("fill") for t in root.iter(f"{SVG}text")} == {None}  # ink from the stylesheets, per theme
    # nodes keep a light fill, so their black ink (architecture.css) reads in both themes; no white ground box
    fills = {e.get("fill") for g in root.iter(f"{SVG}g") if g.get("class") == "node" for e in g if e.get("fill")}
    assert fills and all(contrast_ratio("#000000", fill) >= 4.5 for fill in fills)
    assert 'fill="white"' not in svg and ".bvl-fig g.node text { fill: #000000; }" in all_css()
    png = panel.save(tmp_path / "architecture.png", scale=2, theme="dark")
    width, height = float(root.get("width")), float(root.get("height"))
    assert struct.unpack(">II", png.read_bytes()[16:24]) == (round(width * 2), round(height * 2))
    panel.depth.value = 1
    assert "BERTLayer" not in panel.graph_view.svg and panel.graph_view.svg == panel.to_svg()
    code = esm("architecture.js")
    assert 'showFigure(viewport, source)' in code and "innerHTML" not in code and "cssText" not in code


def test_missing_dot_falls_back_to_mermaid_and_says_so(pretraining_model, monkeypatch):
    import bertviz_lab.trace.diagram as diagram

    monkeypatch.setattr(diagram.shutil, "which", lambda name: None)
    panel = ArchitecturePanel(pretraining_model, renderer="graphviz")
    assert "Graphviz" in panel.error.value and "mermaid instead" in panel.error.value
    assert "bvl-error" in panel.error.value and "style=" not in panel.error.value
    # the one view shows the front end's mermaid drawing of the source output, with the same fit, zoom and pan
    assert panel.diagram_output.layout.display is None and panel.graph_view.renderer == "mermaid"
    assert "bvl-mermaid-source" in panel.diagram_output._dom_classes and panel.graph_view.font_size == 16
    panel.renderer.value = "graphviz"
    panel.renderer.value = "mermaid"
    assert panel.graph_view.renderer == "mermaid" and panel.graph_view.layout.display is None


def test_new_inputs_are_traced_again(architecture, pretraining_model):
    architecture.inputs = example_inputs(pretraining_model, (2, 5))
    architecture.rerun()
    assert "(2,5) → (2,5,128)" in str(architecture.diagram())


# DevicePicker --------------------------------------------------------------------------------------------
def test_lists_exactly_the_available_devices(backbone):
    picker = DevicePicker(backbone)
    assert picker.available == available_devices()
    infos = describe_devices()
    assert list(picker.buttons) == [info.name for info in infos]
    for info in infos:
        button = picker.buttons[info.name]
        assert button.disabled == (not info.available)
        if info.available:
            assert button.description == info.label and info.name in button.tooltip
        else:
            assert info.reason and button.tooltip == info.reason and "unavailable" in button.description
    assert "cpu" in picker.available and not picker.buttons["cpu"].disabled
    if torch.cuda.is_available():
        assert picker.buttons["cuda:0"].description == f"cuda:0 · {torch.cuda.get_device_name(0)}"
    else:
        assert picker.buttons["cuda"].disabled and "CUDA" in picker.buttons["cuda"].tooltip


def test_moving_calls_back_with_the_device(backbone):
    seen: list[torch.device] = []
    later: list[torch.device] = []
    picker = DevicePicker(backbone, on_change=seen.append)
    picker.on_device_change(later.append)
    assert picker.move_to("cpu") == torch.device("cpu")
    assert seen == later == [torch.device("cpu")]
    picker.buttons["cpu"].click()
    assert seen == [torch.device("cpu")] * 2
    assert picker.buttons["cpu"].button_style == "primary"
    assert next(backbone.parameters()).device.type == "cpu"
    memory = model_memory_bytes(backbone)
    tensors = {id(t): t for t in [*backbone.parameters(), *backbone.buffers()]}.values()
    assert memory == sum(t.numel() * t.element_size() for t in tensors)
    assert f"weights {format_bytes(memory)}" in picker.status.value and "model on cpu" in picker.status.value
    assert picker._repr_mimebundle_()["text/html"] == picker.static_html()


@pytest.mark.parametrize("name", ["cuda:9", "mps", "tpu"])
def test_unavailable_devices_raise_naming_the_available_ones(backbone, name):
    if name == "mps" and "mps" in available_devices():
        pytest.skip("this machine has MPS")
    seen: list[torch.device] = []
    picker = DevicePicker(backbone, on_change=seen.append)
    with pytest.raises(ValueError) as error:
        picker.move_to(name)
    message = str(error.value)
    assert name in message and all(device in message for device in available_devices())
    assert seen == [] and next(backbone.parameters()).device.type == "cpu"


def test_device_summary_exports_as_an_svg_table(backbone, tmp_path):
    picker = DevicePicker(backbone)
    svg = picker.to_svg()
    root = ET.fromstring(svg)
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert texts[0] == picker.summary() and texts[0].startswith("model on cpu: weights ")
    assert texts[1:4] == ["device", "available", "detail"]
    for info in describe_devices():
        assert info.name in texts and (info.label if info.available else info.reason) in texts
    png = picker.save(tmp_path / "devices.png")
    assert struct.unpack(">II", png.read_bytes()[16:24]) == (int(root.get("width")), int(root.get("height")))
    # themed: the ground, text and rules by class; the header band from the theme too
    assert root.get("class").split() == ["bvl-fig", "bvl-table"] and root[0].get("class") == "bvl-ground"
    assert all(e.get("fill") is None and e.get("font-family") is None for e in root.iter(f"{SVG}text"))
    assert [e.get("class") for e in root.iter(f"{SVG}rect")][1:] == ["bvl-band"] and "stroke=" not in svg
    html = picker.status.value
    assert "bvl-table" in html and "style=" not in html


def test_format_bytes():
    assert [format_bytes(n) for n in (0, 1023, 1536, 5 * 2**20, 3 * 2**30, 2**42)] == [
        "0 B", "1023 B", "1.5 KiB", "5.0 MiB", "3.0 GiB", "4096.0 GiB"]
