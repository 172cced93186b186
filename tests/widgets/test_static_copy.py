"""A panel's static copy: displayed before the live view, hidden by it while it draws, kept in step with the figure
through its display id and its link's synced HTML (which every front end writes into its own notebook model)."""

from __future__ import annotations

import re
import struct
import time
import xml.etree.ElementTree as ET

import ipywidgets as widgets
import pytest

from bertviz_lab.widgets.panels import static_copy as sc
from bertviz_lab.widgets.panels.panel import Panel
from bertviz_lab.widgets.panels.workbench import TABS, Workbench

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class Counter(Panel):
    """A panel whose figure is a number."""

    def __init__(self) -> None:
        self.count = 0
        super().__init__([widgets.HTML("live")])

    def static_html(self) -> str:
        return f"<p class='count'>{self.count}</p>"

    def bump(self) -> None:
        self.count += 1
        self.figure_changed()


class Handle:
    """Stands in for IPython's DisplayHandle: records what each update sends."""

    def __init__(self, bundle: dict) -> None:
        self.sent = [bundle]

    def update(self, bundle: dict, raw: bool = False) -> None:
        assert raw
        self.sent.append(bundle)


@pytest.fixture
def displayed(monkeypatch) -> list:
    """What IPython's display() was given, in order: (bundle, handle or None)."""
    shown: list = []

    def display(bundle, raw=False, display_id=None):
        assert raw
        handle = Handle(bundle) if display_id else None
        shown.append((bundle, handle))
        return handle

    monkeypatch.setattr("IPython.display.display", display)
    return shown


def test_the_copy_comes_first_then_the_live_view_that_hides_it(displayed):
    panel = Counter()
    panel._ipython_display_()
    (copy, handle), (live, none) = displayed
    assert none is None and handle is not None
    assert set(copy) == {"text/html", "text/plain"} and "<p class='count'>0</p>" in copy["text/html"]
    assert WIDGET_VIEW in live and "text/html" not in live  # the figure travels once, in the copy
    links = [child for child in panel.children if isinstance(child, sc.PanelLink)]
    assert len(links) == 1 and links[0].static_id == panel.static_copy.id
    assert links[0].html == copy["text/html"]  # what a front end writes into its notebook is what was displayed
    assert "bvl-panel" in panel._dom_classes  # how the link's front end finds the panel around it
    root = ET.fromstring(copy["text/html"])
    assert root.get("data-bvl-static") == panel.static_copy.id
    style = root.find("style").text
    assert f'[data-bvl-static="{panel.static_copy.id}"]' in style and ":has(:has(" not in style
    panel._ipython_display_()  # shown twice: two copies, one link
    assert sum(isinstance(child, sc.PanelLink) for child in panel.children) == 1


def test_changes_reach_every_copy_at_most_twice_a_second_and_the_last_always(displayed, monkeypatch):
    monkeypatch.setattr(sc, "MIN_INTERVAL_S", 0.3)
    panel = Counter()
    panel._ipython_display_()
    panel._ipython_display_()
    first, second = displayed[0][1], displayed[2][1]
    panel.bump()  # the first change goes at once
    assert "<p class='count'>1</p>" in first.sent[-1]["text/html"] and len(second.sent) == 2
    panel.bump()
    panel.bump()  # within the interval: held back, then sent once, with the latest figure
    assert len(first.sent) == 2
    deadline = time.monotonic() + 5
    while len(first.sent) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.35)
    assert len(first.sent) == 3 and "<p class='count'>3</p>" in first.sent[-1]["text/html"]
    assert second.sent[-1] == first.sent[-1] and panel.static_copy.link.html == first.sent[-1]["text/html"]


def test_a_copy_is_computed_once_per_change():
    panel = Counter()
    calls = []
    original = panel.static_html
    panel.static_html = lambda: calls.append(1) or original()
    panel.static_copy.html(), panel.static_copy.html()
    panel.bump()
    panel.static_copy.html()
    assert len(calls) == 2


def test_a_copy_that_cannot_be_drawn_says_so_and_does_not_raise():
    panel = Counter()
    panel.static_html = lambda: (_ for _ in ()).throw(RuntimeError("no <dot> here"))
    html = panel.static_copy.html()
    assert "could not be drawn" in html and "no &lt;dot&gt; here" in html


def tab_sections(html: str) -> list[tuple[str, bool]]:
    """(tab, open) for each tab section of a workbench's static copy."""
    return [(tab, bool(opened)) for tab, opened in re.findall(r"<details class='bvl-tab' data-tab='(\w+)'( open)?",
                                                              html)]


def test_the_workbench_copy_follows_its_tabs(pretraining_model, minilm_tokenizer):
    bench = Workbench(pretraining_model, minilm_tokenizer, text="The cat sat on the mat.")
    html = bench.static_copy.html()
    assert tab_sections(html) == [(tab, tab == "attention") for tab in TABS]
    assert html.count("<svg") >= 3  # attention, masking and the device table at least
    bench.tabs.selected_index = 1
    assert tab_sections(bench.static_copy.html())[1] == ("masking", True)
    before = bench.static_copy.html()
    bench.masking.figure_changed()  # a tab's change reaches the workbench's copy
    assert bench.static_copy._html is None and bench.static_copy.html() == before


def test_the_export_bar_says_why_a_figure_was_not_saved(tmp_path, monkeypatch):
    from bertviz_lab.widgets.panels.export_bar import ExportBar

    monkeypatch.chdir(tmp_path)
    panel = Counter()
    panel.to_svg = lambda: (_ for _ in ()).throw(FileNotFoundError("Graphviz's dot is not installed <here>"))
    bar = ExportBar(panel, "counter")
    assert bar.export() is None
    assert "not saved" in bar.status.value and "&lt;here&gt;" in bar.status.value
    panel.to_svg = lambda: '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="20"><text>1</text></svg>'
    bar.format.value = "png"
    path = bar.export()
    assert path.parent.name == "bertviz_figures" and path.suffix == ".png" and "saved" in bar.status.value
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    assert (width, height) == (10, 20)


def link_of(panel: Panel) -> sc.PanelLink:
    return panel.static_copy.link


def test_the_link_carries_the_copy_of_every_change_also_made_from_a_front_end(displayed, monkeypatch,
                                                                              pretraining_model, minilm_tokenizer):
    monkeypatch.setattr(sc, "MIN_INTERVAL_S", 0)  # every change sent at once
    bench = Workbench(pretraining_model, minilm_tokenizer, text="The cat sat on the mat.")
    bench._ipython_display_()
    (copy, handle), _ = displayed
    assert link_of(bench).html == copy["text/html"] and "layer 0" in link_of(bench).html
    bench.attention.layer.value = 2  # as a dropdown in a reloaded page or a second tab sets it
    bench.attention.head.value = 3
    html = link_of(bench).html
    assert "layer 2" in html and "head 3" in html and "layer 0" not in html
    assert html == bench.static_copy.bundle()["text/html"] == handle.sent[-1]["text/html"]
    bench.text_box.value = "A <b>dog</b> & a cat"  # typed in a front end, then its Run button
    bench.run_button.click()
    html = link_of(bench).html
    assert "A &lt;b&gt;dog&lt;/b&gt; &amp; a cat" in html and "<b>dog</b>" not in html
    assert html == bench.static_copy.bundle()["text/html"] == handle.sent[-1]["text/html"]
    assert html.startswith(f'<div class="bvl-static" data-bvl-static="{bench.static_copy.id}">')


def test_the_link_follows_changes_before_any_output_is_updated(displayed):
    panel = Counter()
    panel._ipython_display_()
    panel.static_copy.handles.clear()  # a front end that never knew the display id: only the link reaches it
    panel.bump()
    assert "<p class='count'>1</p>" in link_of(panel).html


def test_close_releases_the_link_and_cancels_a_pending_update(displayed, monkeypatch):
    monkeypatch.setattr(sc, "MIN_INTERVAL_S", 0.2)
    panel = Counter()
    panel._ipython_display_()
    link, copy = link_of(panel), panel.static_copy
    handle = displayed[0][1]
    panel.bump()
    panel.bump()  # held back for the interval
    assert len(handle.sent) == 2 and copy._timer is not None
    panel.close()
    assert link.comm is None and copy.link is None and copy._timer is None
    assert copy.handles == [] and copy.listeners == []
    time.sleep(0.4)
    assert len(handle.sent) == 2 and "<p class='count'>1</p>" in link.html  # nothing went out after close
    assert panel.comm is None


def test_the_copy_travels_in_messages_not_in_the_widget_state(displayed, monkeypatch):
    """A notebook that stores its widgets' state (nbconvert --execute) must not hold every figure twice: the link's
    state is its id alone; the HTML goes to the front ends in a message on every change and to one that asks."""
    panel = Counter()
    panel._ipython_display_()
    link = link_of(panel)
    sent: list[dict] = []
    monkeypatch.setattr(link, "send", lambda content, buffers=None: sent.append(content))
    assert set(link.get_state()) & {"html"} == set() and link.static_id == panel.static_copy.id
    panel.bump()
    assert sent == [{"type": "html", "html": link.html}] and "<p class='count'>1</p>" in link.html
    link._answer(None, {"type": "html?"}, [])  # a reloaded page attaches and asks
    link._answer(None, {"type": "something else"}, [])
    link._answer(None, "html?", [])
    assert sent[1:] == [{"type": "html", "html": link.html}]
    link.html = link.html  # the same copy again: nothing to send
    assert len(sent) == 2


def test_a_held_back_update_goes_out_when_the_cell_ends_with_one_callback_a_copy(displayed, monkeypatch):
    """Changes held back for the interval are sent at the end of the cell that made them (an executed notebook keeps
    each cell's figure), through one post_execute callback however many changes wait, removed once it ran."""
    from types import SimpleNamespace

    from IPython.core.events import EventManager

    shell = SimpleNamespace()  # what the copy uses of a kernel's shell: its events (no global shell is made)
    shell.events = EventManager(shell, {"post_execute": None})
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    monkeypatch.setattr(sc, "MIN_INTERVAL_S", 60)  # the timer alone would wait a minute
    panel = Counter()
    panel._ipython_display_()
    handle, before = displayed[0][1], len(shell.events.callbacks["post_execute"])
    panel.bump()
    for _ in range(5):
        panel.bump()  # held back
    assert len(shell.events.callbacks["post_execute"]) == before + 1
    sent = len(handle.sent)
    shell.events.trigger("post_execute")
    assert len(handle.sent) == sent + 1 and "<p class='count'>6</p>" in handle.sent[-1]["text/html"]
    assert len(shell.events.callbacks["post_execute"]) == before and panel.static_copy._timer is None
    panel.close()
