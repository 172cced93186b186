"""ArchitecturePanel (mermaid / graphviz diagram, depth, collapse, shapes, parameter table) and DevicePicker (exactly the
available devices, disabled ones with the reason, moves and callbacks, clear errors)."""

from __future__ import annotations

import graphviz
import pytest
import torch

from bertviz_lab.device import available_devices, describe_devices
from bertviz_lab.trace import MermaidDiagram
from bertviz_lab.widgets import ArchitecturePanel, DevicePicker
from bertviz_lab.widgets.architecture_panel import example_inputs
from bertviz_lab.widgets.device_picker import format_bytes, model_memory_bytes
from widgets_testlib import parse_html


# ArchitecturePanel ---------------------------------------------------------------------------------------
@pytest.fixture
def architecture(pretraining_model) -> ArchitecturePanel:
    return ArchitecturePanel(pretraining_model)


def test_mermaid_diagram_of_a_tiny_pretraining_bert(architecture):
    diagram = architecture.diagram()
    assert isinstance(diagram, MermaidDiagram)
    text = str(diagram)
    assert text.startswith("flowchart")
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


def test_parameter_table_and_static_fallback(architecture, pretraining_model):
    table = architecture.table.value
    parsed = parse_html(table)
    assert parsed.tags.count("table") == 1 and "tr" in parsed.tags
    total = sum(p.numel() for p in pretraining_model.parameters())
    assert f"{total:,}" in table and "BERTLayer" in table and "(1,8,30522)" in table
    static = architecture._repr_mimebundle_()["text/html"]
    assert static == architecture.static_html()
    assert "<pre class='mermaid'>flowchart" in static and "&lt;br/&gt;" in static and f"{total:,}" in static
    assert "<script" not in static


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
    assert memory == sum(t.numel() * t.element_size() for t in {id(t): t for t in
                                                                 [*backbone.parameters(), *backbone.buffers()]}.values())
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


def test_format_bytes():
    assert [format_bytes(n) for n in (0, 1023, 1536, 5 * 2**20, 3 * 2**30, 2**42)] == [
        "0 B", "1023 B", "1.5 KiB", "5.0 MiB", "3.0 GiB", "4096.0 GiB"]
