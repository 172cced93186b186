"""Figures that survive: the workbench after a page reload, in a second tab, reopened without its kernel, in
Notebook 7, and in nbconvert HTML with and without --execute, in headless Chromium, offline. Changes made in a
reloaded page or in a second tab reach the static copy that a save stores.

Each test writes its own small notebook (a Workbench on the default model, then a cell that changes the layer from
the kernel) into the server's folder, runs it, and compares what is drawn, not merely that something is there.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from browser_lab import (
    MODEL_STATIC_COPIES,
    SCREENSHOTS,
    LabServer,
    allowed_url,
    delete_sessions,
    kernel_prints,
    live_heatmap_shows,
    open_and_run,
    open_notebook,
    recording_context,
    reload_notebook,
    save_notebook,
    saved_static_copies,
    write_notebook,
)

from bertviz_lab.widgets.notebook_html import notebook_to_html
from bertviz_lab.widgets.panels.workbench import TABS

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

TIMEOUT_MS = 120_000
CELLS = [
    "from bertviz_lab.widgets import Workbench\n"
    "bench = Workbench(text='The cat sat on the mat because it was warm.')\n"
    "bench",
    "bench.attention.layer.value = 2  # a change made from the kernel, after the figure was first drawn",
]
# nbconvert's own page template asks for require.js and MathJax on public CDNs (and the widget renderer when the
# notebook holds widget state); every one of those requests fails here, and the figures must show all the same.
# `bertviz-lab html` writes the same page without them: there, no request may leave at all.
TEMPLATE_ASSETS = ("require.js", "mathjax", "MathJax", "html-manager", "embed-amd")

# What a panel draws, as numbers: every visible canvas' pixel sums and every visible SVG's text and shape count.
DRAWN = """(root) => {
  const visible = (e) => e.offsetParent !== null && e.getBoundingClientRect().width > 0;
  const canvases = [...root.querySelectorAll('canvas')].filter(visible).map((c) => {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let sum = 0, ink = 0;
    for (let i = 0; i < data.length; i += 4) { sum += data[i] + 3 * data[i + 1] + 7 * data[i + 2];
                                               if (data[i] < 250 || data[i + 1] < 250) ink++; }
    return [c.width, c.height, sum, ink];
  });
  const svgs = [...root.querySelectorAll('svg')].filter(visible).filter((s) => !s.closest('svg svg'))
    .map((s) => [s.querySelectorAll('rect, line, path, polyline, circle, image').length,
                 s.textContent.replace(/\\s+/g, ' ').trim().slice(0, 400)]);
  const panel = [...root.querySelectorAll('.widget-tab-contents > *, .lm-TabPanel-stackedPanel > *')]
    .find(visible) || root;
  return {canvases, svgs, text: panel.innerText.replace(/\\s+/g, ' ').trim().slice(0, 2000)};
}"""

STATIC_STATE = """() => {
  const visible = (e) => e.offsetParent !== null && e.getBoundingClientRect().height > 0;
  const copies = [...document.querySelectorAll('[data-bvl-static]')];
  const errors = [...document.querySelectorAll('.jp-OutputArea-output, .output_subarea')]
    .filter((e) => visible(e) && /Error displaying widget|Loading widget/.test(e.textContent))
    .map((e) => e.textContent.slice(0, 200));
  return {copies: copies.length, shown: copies.filter(visible).length, errors,
          tabs: copies.filter(visible).flatMap((c) => [...c.querySelectorAll('details.bvl-tab')]
            .map((d) => ({tab: d.dataset.tab, svgs: d.querySelectorAll('svg').length,
                          chips: d.querySelectorAll('.bvl-chip').length,
                          text: d.textContent.replace(/\\s+/g, ' ').slice(0, 300)})))};
}"""
STATIC_COPY_SHOWN = "() => (" + STATIC_STATE + ")().shown === 1"  # the page shows one static copy


def workbench(page: Any) -> Any:
    """The live workbench's output (the widget, not its static copy)."""
    return page.locator(".jp-OutputArea-output:has(.widget-tab)").first


def tab_titles(page: Any) -> Any:
    return workbench(page).locator(".lm-TabBar-tab")


def drawn_per_tab(page: Any) -> dict[str, Any]:
    """Click through the tabs and read what each draws, once it has settled (two equal reads in a row)."""
    titles = tab_titles(page)
    titles.first.wait_for(timeout=TIMEOUT_MS)
    found = {}
    for index in range(titles.count()):
        title = titles.nth(index)
        name = title.inner_text().strip()
        title.click()
        previous, deadline = None, time.monotonic() + 20
        while time.monotonic() < deadline:
            time.sleep(0.4)
            current = workbench(page).evaluate(DRAWN)
            if current == previous and (current["canvases"] or current["svgs"] or current["text"]):
                break
            previous = current
        found[name] = current
    titles.first.click()
    return found


def assert_offline(requests: list[str], allowed_extra: tuple[str, ...] = ()) -> None:
    foreign = sorted({url for url in requests if not allowed_url(url) and not url.startswith("file://")
                      and not any(asset in url for asset in allowed_extra)})
    assert not foreign, f"requests left the machine: {foreign}"


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """A server of its own: once it has served a Notebook 7 page, jupyter-server (2.21, notebook 7.6, jupyterlab 4.6)
    answers JupyterLab's request for one of its fonts with 403, which the notebook tests would count as an error."""
    server = LabServer(tmp_path_factory.mktemp("jupyterlab_saved_figures"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def lab_context(chromium, lab_server):
    """A browser context of its own (cookies, cache): Notebook 7 and file:// pages opened here leave nothing behind
    for the notebook tests, which share one context."""
    with recording_context(chromium, lab_server) as context:
        yield context


def test_figures_survive_a_reload_and_a_second_tab(page, lab_server, lab_context):
    path = open_and_run(page, lab_server, "survive_reload.ipynb", CELLS).path
    before = drawn_per_tab(page)
    assert_heatmap_drawn(before["Attention"])
    assert "[MASK]" in before["Masking"]["text"] or before["Masking"]["svgs"], before["Masking"]
    save_notebook(page)
    reload_notebook(page, path, TIMEOUT_MS)
    after_reload = drawn_per_tab(page)
    assert after_reload == before
    second = lab_context.new_page()
    try:
        open_notebook(second, lab_server, path)
        assert drawn_per_tab(second) == before
        assert second.evaluate(STATIC_STATE)["shown"] == 0  # live views hide their static copies
    finally:
        second.close()
    assert not page.errors, page.errors


@pytest.mark.parametrize("app", ["lab", "notebook7"])
def test_a_saved_notebook_reopened_without_its_kernel_shows_every_tab(page, lab_server, lab_context, app):
    path = open_and_run(page, lab_server, f"reopened_{app}.ipynb", CELLS, app).path
    assert page.evaluate(STATIC_STATE)["shown"] == 0
    save_notebook(page)
    delete_sessions(lab_context, lab_server)  # the kernel is gone: no widget model survives
    open_notebook(page, lab_server, path, app)  # a fresh kernel that knows none of the saved widgets
    page.wait_for_function(STATIC_COPY_SHOWN, timeout=TIMEOUT_MS, polling=250)
    state = page.evaluate(STATIC_STATE)
    assert state["shown"] == 1 and not state["errors"], state
    tabs = {tab["tab"]: tab for tab in state["tabs"]}
    assert list(tabs) == list(TABS)  # every tab of the registry (the Causal tab says to open it)
    assert_every_tab_drawn(tabs)
    assert "layer 2" in tabs["attention"]["text"], "the copy shows the figure as the kernel left it"
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"reopened_without_kernel_{app}.png"), full_page=True)


def assert_heatmap_drawn(attention: dict) -> None:
    """The attention tab shows the heatmap as the kernel left it (layer 2) with its cells: one SVG of many shapes."""
    assert any(shapes > 100 and text.startswith("layer 2 ·") for shapes, text in attention["svgs"]), attention


def assert_every_tab_drawn(tabs: dict[str, dict]) -> None:
    """Attention and architecture as SVG figures; masking as SVG or its coloured token chips."""
    assert tabs["attention"]["svgs"] >= 1 and tabs["architecture"]["svgs"] >= 1, tabs
    assert tabs["masking"]["svgs"] >= 1 or tabs["masking"]["chips"] > 3, tabs["masking"]


def nbconvert(notebook: Path, execute: bool) -> Path:
    output = notebook.with_name(notebook.stem + ("-executed" if execute else "") + ".html")
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(notebook), "--output",
               output.name, *(["--execute"] if execute else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=notebook.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return output


@pytest.fixture(scope="module")
def saved_after_a_run(chromium, lab_server) -> Path:
    """The notebook as JupyterLab saves it after a run, made once: the conversions of it only read it."""
    with recording_context(chromium, lab_server) as context:
        page = context.new_page()
        path = open_and_run(page, lab_server, "converted_saved.ipynb", CELLS, timeout_ms=TIMEOUT_MS).path
        save_notebook(page)
        page.close()
    return lab_server.root / path


@pytest.mark.parametrize("execute, tool", [(False, "nbconvert"), (True, "nbconvert"), (False, "bertviz-lab html"),
                                           (True, "bertviz-lab html")],
                         ids=["saved", "executed", "offline-page-saved", "offline-page-executed"])
def test_nbconvert_html_shows_every_figure_offline(page, lab_server, lab_context, request, execute, tool):
    name = f"converted_{'executed' if execute else 'saved'}_{tool.split()[-1]}"
    if execute:
        notebook = lab_server.root / write_notebook(lab_server, f"{name}.ipynb", CELLS)
    else:  # a copy of the notebook saved by JupyterLab after a run
        notebook = lab_server.root / "notebooks" / f"{name}-run.ipynb"
        shutil.copyfile(request.getfixturevalue("saved_after_a_run"), notebook)
    if tool == "nbconvert":
        html = nbconvert(notebook, execute)
    else:  # the same page without nbconvert's CDN scripts
        html = notebook_to_html(notebook, notebook.with_name(f"{name}.html"), execute=execute)
    # bertviz-lab html runs a notebook keeping each cell's figure: the second cell's change is its own output
    story = execute and tool == "bertviz-lab html"
    first = len(lab_context.requested)
    page.goto(html.as_uri(), wait_until="load")
    page.wait_for_function(f"() => ({STATIC_STATE})().shown === {2 if story else 1}", timeout=TIMEOUT_MS,
                           polling=250)
    state = page.evaluate(STATIC_STATE)
    assert not state["errors"], state
    tabs = {tab["tab"]: tab for tab in state["tabs"]}  # the last copy's tabs
    assert_every_tab_drawn(tabs)
    assert "layer 2" in tabs["attention"]["text"]
    if story:
        first_copy = next(tab for tab in state["tabs"] if tab["tab"] == "attention")
        assert "layer 0" in first_copy["text"], first_copy
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    assert_offline(lab_context.requested[first:], TEMPLATE_ASSETS if tool == "nbconvert" else ())


def test_notebook_7_renders_the_workbench(page, lab_server):
    open_and_run(page, lab_server, "notebook7.ipynb", CELLS, "notebook7")
    drawn = drawn_per_tab(page)
    assert_heatmap_drawn(drawn["Attention"])
    assert page.evaluate(STATIC_STATE)["shown"] == 0


def test_the_export_button_writes_a_file(page, lab_server):
    open_and_run(page, lab_server, "export.ipynb", CELLS)
    figures = lab_server.root / "notebooks" / "bertviz_figures"
    before = set(figures.glob("*")) if figures.exists() else set()
    workbench(page).locator("button:has-text('export')").first.click()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (set(figures.glob("*.svg")) - before):
        time.sleep(0.3)
    written = sorted(set(figures.glob("*.svg")) - before)
    assert written, "no figure was written"
    assert written[0].read_text().startswith("<svg") and written[0].stat().st_size > 1000


NEW_TEXT = "A small dog slept under the old table."
KERNEL_COPY_DIGEST = ("import hashlib; "
                      "print(hashlib.sha256(bench.static_copy.bundle()['text/html'].encode()).hexdigest())")
# The visible static copy's attention figure, and the live heatmap's figure, as elements to screenshot.
COPY_ATTENTION_SVG = "[data-bvl-static] details.bvl-tab[data-tab='attention'] svg"
LIVE_ATTENTION_SVG = ".bvl-heatmap-view svg"


def dropdown(page: Any, label: str) -> Any:
    """The live workbench's dropdown with this label (the attention panel's layer or head)."""
    return workbench(page).locator(f".widget-dropdown:has(label:text-is('{label}')) select").first


def change_text_layer_and_head(page: Any, text: str, layer: int, head: int) -> dict:
    """In this page, as a person would: type a text and run it, pick a layer, then a head; wait for each to show."""
    workbench(page).locator("textarea").first.fill(text)
    workbench(page).locator("button:has-text('Run')").first.click()
    live_heatmap_shows(page, "", "dog")
    dropdown(page, "layer").select_option(label=str(layer))
    live_heatmap_shows(page, f"layer {layer} ·", "dog")
    dropdown(page, "head").select_option(label=str(head))
    return live_heatmap_shows(page, f"layer {layer} · head {head} ·", "dog")


def model_copy_shows(page: Any, parts: list[str]) -> None:
    """Wait until the page's notebook model holds a static copy naming every one of `parts`."""
    page.wait_for_function("(parts) => (" + MODEL_STATIC_COPIES + ")().some((h) => parts.every((p) => h.includes(p)))",
                           arg=parts, timeout=TIMEOUT_MS, polling=250)


def assert_saved_copy_is_the_kernels(page: Any, notebook: Path, parts: list[str]) -> str:
    """The saved file holds one static copy, naming `parts`, equal to the one the kernel draws now."""
    copies = saved_static_copies(notebook)
    assert len(copies) == 1, f"{len(copies)} static copies in {notebook.name}"
    missing = [part for part in parts if part not in copies[0]]
    assert not missing, f"the saved copy does not show {missing}"
    digest = hashlib.sha256(copies[0].encode()).hexdigest()
    assert digest == kernel_prints(page, KERNEL_COPY_DIGEST).strip(), "the saved copy differs from the kernel's"
    return copies[0]


def same_picture(first: bytes, second: bytes) -> float:
    """The share of pixels that differ between two PNG screenshots of the same size, at the best of the nine
    one-pixel shifts: the same SVG placed at another fraction of a pixel in another page lands a pixel apart."""
    import numpy as np
    from PIL import Image

    a = np.asarray(Image.open(io.BytesIO(first)).convert("RGB"), dtype=np.int16)
    b = np.asarray(Image.open(io.BytesIO(second)).convert("RGB"), dtype=np.int16)
    assert a.shape == b.shape, f"the pictures differ in size: {a.shape} and {b.shape}"
    h, w = a.shape[:2]
    shares = []
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            part_a = a[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)]
            part_b = b[max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)]
            shares.append(float((np.abs(part_a - part_b).max(axis=2) > 8).mean()))
    return min(shares)


def reopen_and_check_the_copy(page: Any, server: Any, context: Any, path: str, shown: dict, live_png: bytes,
                              name: str, app: str = "lab") -> None:
    """Shut the kernel down, reopen the notebook on a kernel that knows none of its widgets, and check that the
    static copy on screen is the last state the live view showed: its title, its text, the same picture."""
    page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    delete_sessions(context, server)
    open_notebook(page, server, path, app)
    page.wait_for_function(STATIC_COPY_SHOWN, timeout=TIMEOUT_MS, polling=250)
    state = page.evaluate(STATIC_STATE)
    assert not state["errors"], state
    tabs = {tab["tab"]: tab for tab in state["tabs"]}
    assert list(tabs) == list(TABS)  # every tab of the registry (the Causal tab says to open it)
    assert_every_tab_drawn(tabs)
    copy_svg = page.locator(COPY_ATTENTION_SVG).first
    assert shown["title"] in copy_svg.text_content() and "dog" in copy_svg.text_content()
    assert NEW_TEXT in page.locator("[data-bvl-static] .bvl-workbench > p").first.inner_text()
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}_reopened.png"), full_page=True)
    differ = same_picture(live_png, copy_svg.screenshot())
    assert differ < 0.002, f"the reopened copy's figure differs from the live one in {differ:.1%} of its pixels"


@pytest.mark.parametrize("app", ["lab", "notebook7"])
def test_changes_made_after_a_reload_reach_the_saved_copy(page, lab_server, lab_context, app):
    path = open_and_run(page, lab_server, f"changed_after_reload_{app}.ipynb", CELLS, app).path
    save_notebook(page)
    reload_notebook(page, path, TIMEOUT_MS)  # JupyterLab forgets the copy's display id
    shown = change_text_layer_and_head(page, NEW_TEXT, layer=1, head=3)
    model_copy_shows(page, [shown["title"], "dog"])
    save_notebook(page)
    assert_saved_copy_is_the_kernels(page, lab_server.root / path, [shown["title"], "dog", NEW_TEXT])
    live_png = page.locator(LIVE_ATTENTION_SVG).first.screenshot()
    reopen_and_check_the_copy(page, lab_server, lab_context, path, shown, live_png, f"changed_after_reload_{app}",
                              app)
    # Notebook 7 (7.6) itself throws while loading a settings schema in these pages ("reading 'schema'" in
    # notebook_core's load); no other page error is allowed.
    errors = [error for error in page.errors if not (app == "notebook7" and "reading 'schema'" in error)]
    assert not errors, errors


def test_changes_made_in_a_second_tab_reach_the_copy_saved_from_the_first(page, lab_server, lab_context):
    path = open_and_run(page, lab_server, "changed_in_second_tab.ipynb", CELLS).path
    save_notebook(page)  # the second tab opens what the file holds
    second = lab_context.new_page()
    try:
        open_notebook(second, lab_server, path)
        shown = change_text_layer_and_head(second, NEW_TEXT, layer=4, head=7)
    finally:
        second.close()
    assert live_heatmap_shows(page, shown["title"], "dog") == shown  # the first tab's live view follows
    model_copy_shows(page, [shown["title"], "dog"])
    save_notebook(page)
    assert_saved_copy_is_the_kernels(page, lab_server.root / path, [shown["title"], "dog", NEW_TEXT])
    live_png = page.locator(LIVE_ATTENTION_SVG).first.screenshot()
    reopen_and_check_the_copy(page, lab_server, lab_context, path, shown, live_png, "changed_in_second_tab")
    assert not page.errors, page.errors
