"""Panels give memory back: `close()` closes every widget a panel made and drops its trace; controls share their
layout and style models; a notebook cell run again closes the panels its last run showed."""

from __future__ import annotations

import gc
import weakref

import ipywidgets as widgets
import pytest
from ipywidgets.widgets.widget import _instances

from bertviz_lab.widgets import AttentionPanel, Workbench
from bertviz_lab.widgets.panels import shown_panels
from bertviz_lab.widgets.panels.controls import is_shared, lean, look, owned_widgets

TEXT = "The cat sat on the mat because it was tired."


def registered() -> set[str]:
    """The ids of every widget model ipywidgets holds open (what the page was sent and the kernel keeps alive)."""
    return set(_instances)


def open_every_view(panel: AttentionPanel) -> None:
    """Show each view once, so the views made on first use (saliency) exist too."""
    for view in ("head view", "model view", "neuron view", "saliency", "heatmap"):
        panel.view.value = view


@pytest.fixture
def warm_looks(pretraining_model, minilm_tokenizer) -> None:
    """One panel built, every view shown, and closed first, so the shared looks exist before a test counts models."""
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT)
    open_every_view(panel)
    panel.close()


def test_close_leaves_no_widget_of_the_panel_open_and_drops_its_trace(pretraining_model, minilm_tokenizer, warm_looks):
    before = registered()
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT)
    open_every_view(panel)
    panel.model_view.ablated = [[0, 1]]  # an ablation run held too
    assert panel.saliency is not None and panel.ablation_bar.ablation is not None
    made = registered() - before
    assert len(made) > 40
    trace, bar, heatmap = weakref.ref(panel.trace), panel.ablation_bar, weakref.ref(panel.heatmap)
    panel.close()
    assert registered() - before == set()
    assert panel.trace is None and panel.attentions is None and bar.ablation is None
    assert panel.children == () and not hasattr(panel, "heatmap") and not hasattr(panel, "toolbars")
    del bar
    gc.collect()
    assert trace() is None and heatmap() is None  # nothing else kept the trace or the views (and their data) alive


def test_closing_a_workbench_closes_every_tab_and_its_panels(pretraining_model, minilm_tokenizer, warm_looks):
    before = registered()
    bench = Workbench(pretraining_model, minilm_tokenizer, TEXT)
    bench.attention.view.value = "saliency"
    assert len(registered() - before) > 100
    attention, architecture = bench.attention, bench.architecture
    bench.close()
    assert registered() - before == set()
    assert attention.trace is None and architecture.trace is None and not hasattr(bench, "tabs")


def test_controls_share_their_looks_so_a_panel_sends_few_models(pretraining_model, minilm_tokenizer, warm_looks):
    before = registered()
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT)
    made = [_instances[model_id] for model_id in registered() - before]
    own_looks = [w for w in made if isinstance(w, (widgets.Layout, widgets.Style))]
    boxes_shown_and_hidden = [slot.layout for slot in panel.slots.values()]
    assert {id(look_) for look_ in own_looks} == {id(panel.layout)} | {id(look_) for look_ in boxes_shown_and_hidden}
    assert len(made) < 70, len(made)  # 142 when every control had a layout and a style of its own
    panel.view.value = "head view"  # hiding one view's box hides no other widget
    assert panel.slots["heatmap"].layout.display == "none" and panel.layer.layout.display is None
    assert all(is_shared(w.layout) for w in (panel.layer, panel.head, panel.scale, panel.export_bar.format))
    panel.close()


def test_a_shared_look_closed_by_close_all_is_made_again():
    first = look(width="123px")
    assert lean(widgets.Label, "a", layout={"width": "123px"}).layout is first
    first.close()
    again = lean(widgets.Label, "b", layout={"width": "123px"}).layout
    assert again is not first and again.comm is not None and is_shared(again) and not is_shared(first)


def test_owned_widgets_follow_attributes_not_only_children(pretraining_model, minilm_tokenizer, warm_looks):
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT, view="neuron view")
    panel.view.value = "heatmap"
    owned = {id(w) for w in owned_widgets(panel)}
    hidden_toolbar = panel.toolbars["neuron view"]  # not in the tree while the heatmap shows
    assert hidden_toolbar not in panel.toolbar.children and id(hidden_toolbar) in owned
    assert id(panel.query) in owned and not any(is_shared(w) for w in owned_widgets(panel))
    panel.close()


@pytest.fixture(scope="module")
def notebook_shell(ipython_shell):
    """An IPython shell that runs cells as a front end names them (the execute request's cellId and msg_id)."""
    shell = ipython_shell
    yield shell
    shell.parent_header = {}


def run_cell(shell, cell_id: str, run_id: str, source: str):
    shell.parent_header = {"header": {"msg_id": run_id}, "metadata": {"cellId": cell_id}}
    result = shell.run_cell(source)
    assert result.success, result.error_in_exec or result.error_before_exec
    return result


def test_running_a_cell_again_closes_the_panel_its_last_run_showed(notebook_shell, pretraining_model, minilm_tokenizer,
                                                                   warm_looks):
    notebook_shell.user_ns.update(m=pretraining_model, tok=minilm_tokenizer, AttentionPanel=AttentionPanel)
    source = f"AttentionPanel(model=m, tokenizer=tok, text={TEXT!r})"
    first = run_cell(notebook_shell, "cell-a", "run-1", source).result
    shown_elsewhere = run_cell(notebook_shell, "cell-b", "run-2", source).result
    run_cell(notebook_shell, "cell-c", "run-3", "_bvl_kept = _")  # a reference kept: closing must still free
    assert first.comm is not None and first.trace is not None
    second = run_cell(notebook_shell, "cell-a", "run-4", source).result
    assert first.comm is None and first.trace is None  # the cell's earlier panel is closed
    assert second.comm is not None and shown_elsewhere.comm is not None
    run_cell(notebook_shell, "cell-d", "run-5", "p = _")  # cell d shows nothing but keeps a name for it
    run_cell(notebook_shell, "cell-a", "run-6", "p")  # the same panel shown again by cell a: stays open
    assert second.comm is not None
    run_cell(notebook_shell, "cell-a", "run-7", "1 + 1")  # cell a shows no panel any more
    assert second.comm is None
    run_cell(notebook_shell, "cell-e", "run-8", "q = AttentionPanel(model=m, tokenizer=tok, text='a b c')")
    panel_q = notebook_shell.user_ns["q"]
    run_cell(notebook_shell, "cell-f", "run-9", "q")
    run_cell(notebook_shell, "cell-g", "run-10", "q")
    run_cell(notebook_shell, "cell-f", "run-11", "None")  # still shown by cell g
    assert panel_q.comm is not None
    for cell in "bg":
        run_cell(notebook_shell, f"cell-{cell}", f"run-end-{cell}", "None")
    assert panel_q.comm is None and shown_elsewhere.comm is None
    assert shown_panels._LATEST.get("cell-a") == []


def test_outside_a_notebook_cell_nothing_is_closed(notebook_shell, pretraining_model, minilm_tokenizer, warm_looks):
    shell = notebook_shell
    shell.parent_header = {}
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT)
    shell.user_ns["panel"] = panel
    for _ in range(2):
        assert shell.run_cell("panel").success
    assert panel.comm is not None
    panel.close()


def test_closing_the_causal_tab_closes_every_tool_it_made_and_its_attention_panel(mlm_model, minilm_tokenizer,
                                                                                  warm_looks):
    from bertviz_lab.widgets import CausalPanel

    def every_tool_shown() -> CausalPanel:
        panel = CausalPanel(mlm_model, minilm_tokenizer)
        panel.patching.view.open_cell(1, 2)  # the attention panel below
        for tool in ("logit lens", "ffn neurons", "patching"):  # every tool made; two are off screen when closing
            panel.tool.value = tool
        return panel

    every_tool_shown().close()  # the tools' shared looks (kept for every panel) exist before counting
    before = registered()
    panel = every_tool_shown()
    assert panel.attention is not None and len(panel.tools) == 3 and len(registered() - before) > 60
    attention, lens = weakref.ref(panel.attention), weakref.ref(panel.logit_lens)
    panel.close()
    assert registered() - before == set()
    assert panel.tools == {} and panel.attention is None
    gc.collect()
    assert attention() is None and lens() is None
