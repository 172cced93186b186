"""The registry of views is what every consumer reads: the attention panel's switcher, toolbars and widgets, the
workbench's tabs, %bert_inspect --view, the bertviz-style panel and the docs' tables."""

from __future__ import annotations

import types

import pytest
import torch

from bertviz_lab.magics import BertInspectMagics
from bertviz_lab.views.panel import AttentionMapsPanel
from bertviz_lab.widgets import registry
from bertviz_lab.widgets.panels.attention import AttentionPanel
from bertviz_lab.widgets.panels.attention_views import glue
from bertviz_lab.widgets.panels.workbench import Workbench

TEXT = "The cat sat on the mat."


@pytest.fixture(scope="module")
def magics(minilm_tokenizer, pretraining_model):
    return BertInspectMagics(shell=types.SimpleNamespace(
        user_ns={"m": pretraining_model, "tok": minilm_tokenizer}, configurables=[]))


def test_the_attention_panel_switches_between_the_registered_views_with_their_controls(pretraining_model,
                                                                                       minilm_tokenizer):
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT)
    attention_views = registry.views(registry.ATTENTION)
    assert [label for label, _ in panel.view.options] == [v.label for v in attention_views]
    for view in attention_views:
        panel.view.value = view.name
        if view.name != "saliency":  # the saliency view brings its own panel and controls
            assert panel.on_screen is getattr(panel, view.attribute)
            assert list(panel.toolbar.children[0].children) == [getattr(panel, name) for name in view.controls]
    assert panel.on_screen is panel.saliency
    with pytest.raises(ValueError, match="view must be one of 'heatmap', 'head view'.*got 'graph'"):
        AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT, view="graph")


def test_a_new_view_is_its_glue_and_its_registry_line_with_no_code_in_the_panel(monkeypatch, pretraining_model,
                                                                              minilm_tokenizer):
    """A view the panel has never heard of, given by a registry line and a glue object alone: the switcher offers it
    with the controls its line names, `panel.<attribute>` is its widget, and its glue reports a reader's action
    through the source's `open`, which sets the controls and draws the view once."""
    import ipywidgets as widgets

    from bertviz_lab.widgets.panels import attention_views
    from bertviz_lab.widgets.panels.attention_views import AttentionView

    drawn = []

    class EchoGlue(AttentionView):
        name = "echo view"

        def make(self, source):
            widget = widgets.HTML()
            widget.observe(lambda change: source.open(layer=int(change["new"])), names="placeholder")
            return widget

        def draw(self, source, widget):
            drawn.append(source.layer)
            widget.value = f"layer {source.layer} · head {source.head}"

        def export_name(self, source, widget):
            return f"echo-layer{source.layer}"

        def to_svg(self, source, widget):
            return f"<svg>{widget.value}</svg>"

    monkeypatch.setattr(registry, "REGISTRY", (*registry.REGISTRY, registry.View(
        "echo view", "echo", "the layer and head chosen, in words", registry.ATTENTION, controls=("layer", "head"))))
    monkeypatch.setitem(attention_views._LOADED, "echo view", EchoGlue())
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT, view="echo view", layer=1)
    assert panel.view.options[-1] == ("echo", "echo view")
    assert panel.on_screen is panel.echo_view and panel.echo_view.value == "layer 1 · head 0"
    assert list(panel.toolbar.children[0].children) == [panel.layer, panel.head]
    assert panel.export_bar.name == "echo-layer1" and panel.to_svg() == "<svg>layer 1 · head 0</svg>"
    drawn.clear()
    panel.echo_view.placeholder = "2"  # the widget reports a reader's choice: one redraw at the new layer
    assert drawn == [2] and panel.layer.value == 2 and panel.export_bar.name == "echo-layer2"
    with pytest.raises(AttributeError, match="no attribute 'echo_views'"):
        panel.echo_views


def test_every_attention_view_has_one_glue_module_named_by_its_registry_line():
    for view in registry.views(registry.ATTENTION):
        found = glue(view.name)
        assert found.name == view.name and found.entry == view
        assert type(found).__module__.rsplit(".", 1)[-1] == view.attribute
    with pytest.raises(ValueError, match="view must be one of 'heatmap'.*got 'graph'"):
        glue("graph")


def test_the_bertviz_panel_draws_with_the_attention_panels_glue():
    """AttentionMapsPanel has no drawing of its own: the glue the AttentionPanel uses fills its views (the same
    title a traced model's heatmap has, after the attention's name), and its toolbars are the registered controls
    attention weights alone have (layer, head)."""
    from bertviz_lab.views import attention_sets

    assert not [name for name in vars(AttentionMapsPanel) if name.startswith("_draw")]
    attention = tuple(torch.rand(1, 2, 4, 4).softmax(-1) for _ in range(2))
    panel = AttentionMapsPanel(attention_sets(attention, ["[CLS]", "a", "b", "[SEP]"], sentence_b_start=2), layer=1,
                               heads=[1])
    assert panel.heatmap.title == "all · layer 1 · head 1"
    panel.attention.value = 3
    assert panel.heatmap.title == "sentence A → sentence B · layer 1 · head 1"
    for name in ("heatmap", "head view", "model view"):
        panel.view.value = name
        bar = list(panel.toolbar.children[0].children)
        assert bar == [panel.attention, *(getattr(panel, c) for c in registry.view(name, registry.ATTENTION).controls
                                          if c in ("layer", "head"))]
        assert panel.on_screen is getattr(panel, registry.view(name, registry.ATTENTION).attribute)


def test_the_workbench_has_the_registered_tabs_in_order(pretraining_model, minilm_tokenizer):
    bench = Workbench(pretraining_model, minilm_tokenizer, TEXT)
    tabs = [v for v in registry.views(registry.TAB) if not v.on_request]
    assert [bench.tabs.get_title(i) for i in range(len(bench.tabs.children))] == [v.label for v in tabs]
    assert list(bench.tabs.children) == [getattr(bench, v.attribute) for v in tabs]


@pytest.mark.parametrize("view", [v for v in registry.REGISTRY if v.magic is not None], ids=lambda v: v.magic)
def test_every_magic_name_opens_its_view(magics, view):
    shown = magics.bert_inspect(f'm tok --view {view.magic} "{TEXT}"')
    if view.place == registry.ATTENTION:
        assert isinstance(shown, AttentionPanel) and shown.view.value == view.name
    elif view.name == "attention":
        assert isinstance(shown, AttentionPanel) and shown.view.value == "heatmap"
    else:
        assert type(shown).__name__ == {"masking": "MaskingPreview", "architecture": "ArchitecturePanel",
                                        "training": "TrainingPanel", "device": "DevicePicker",
                                        "causal": "CausalPanel"}[view.name]


def test_layer_and_head_only_where_the_view_has_them(magics):
    panel = magics.bert_inspect(f'm tok --view head --layer 2 "{TEXT}"')
    assert panel.view.value == "head view" and panel.layer.value == 2
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="the model view has none"):
        magics.bert_inspect(f'm tok --view model --layer 2 "{TEXT}"')


def test_the_bertviz_panel_offers_the_views_drawn_from_attentions_alone():
    from bertviz_lab.views import attention_sets

    attention = tuple(torch.rand(1, 2, 4, 4).softmax(-1) for _ in range(2))  # bertviz's input: per layer
    panel = AttentionMapsPanel(attention_sets(attention, ["[CLS]", "a", "b", "[SEP]"]))
    assert panel.view.options == tuple(v.name for v in registry.REGISTRY if v.bertviz)
    assert panel.view.options == ("heatmap", "head view", "model view")


def test_the_docs_tables_list_every_view_and_its_keys():
    keys = registry.keys_table().splitlines()
    assert keys[:2] == ["| view | keys |", "| --- | --- |"]
    assert [row.split(" | ")[0].lstrip("| ") for row in keys[2:]] == [v.label for v in registry.REGISTRY if v.keys]
    table = registry.views_table()
    for view in registry.REGISTRY:
        assert f"| {view.label} |" in table
    assert "`--view neuron`" in table and "`--view all`" not in table
