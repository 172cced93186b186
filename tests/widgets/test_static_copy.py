"""A panel's static copy: displayed before the live view, hidden by it while it draws, kept in step with the figure."""

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
    hiders = [child for child in panel.children if isinstance(child, sc.StaticCopyHider)]
    assert len(hiders) == 1 and hiders[0].static_id == panel.static_copy.id
    root = ET.fromstring(copy["text/html"])
    assert root.get("data-bvl-static") == panel.static_copy.id
    style = root.find("style").text
    assert f'[data-bvl-static="{panel.static_copy.id}"]' in style and ":has(:has(" not in style
    panel._ipython_display_()  # shown twice: two copies, one hider
    assert sum(isinstance(child, sc.StaticCopyHider) for child in panel.children) == 1


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
    assert second.sent[-1] == first.sent[-1]


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


def test_the_workbench_copy_follows_its_tabs(pretraining_model, tokenizer):
    bench = Workbench(pretraining_model, tokenizer, text="The cat sat on the mat.")
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
