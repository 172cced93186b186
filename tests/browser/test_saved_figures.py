"""Figures that survive: the workbench after a page reload, in a second tab, reopened without its kernel, in
Notebook 7, and in nbconvert HTML with and without --execute, in headless Chromium, offline.

Each test writes its own small notebook (a Workbench on the default model, then a cell that changes the layer from
the kernel) into the server's folder, runs it, and compares what is drawn, not merely that something is there.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_lab import (
    KERNEL_READY,
    RUN_ALL,
    RUN_STATE,
    SCREENSHOTS,
    LabServer,
    allowed_url,
    delete_sessions,
    recording_context,
)

from bertviz_lab.widgets.notebook_html import notebook_to_html

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


def write_notebook(server: Any, name: str) -> str:
    path = server.root / "notebooks" / name
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)
    return f"notebooks/{name}"


def open_in_lab(page: Any, server: Any, path: str, app: str = "lab") -> None:
    """Open the notebook in JupyterLab or in Notebook 7 and wait for an idle kernel."""
    where = f"lab/tree/{path}?reset&" if app == "lab" else f"notebooks/{path}?"
    page.goto(f"{server.url}/{where}token={server.token}", wait_until="domcontentloaded")
    page.wait_for_function(KERNEL_READY, arg=path, timeout=TIMEOUT_MS, polling=250)


def run_all(page: Any) -> None:
    page.evaluate(RUN_ALL)
    state = page.wait_for_function(RUN_STATE, timeout=TIMEOUT_MS, polling=500).json_value()
    assert state == "done", "a cell failed"


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


@pytest.fixture
def page(lab_context, lab_server):
    delete_sessions(lab_context, lab_server)
    page = lab_context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"{error} {error.stack or ''}"[:600]))
    page.errors = errors
    yield page
    page.close()
    delete_sessions(lab_context, lab_server)


def test_figures_survive_a_reload_and_a_second_tab(page, lab_server, lab_context):
    path = write_notebook(lab_server, "survive_reload.ipynb")
    open_in_lab(page, lab_server, path)
    run_all(page)
    before = drawn_per_tab(page)
    assert before["Attention"]["canvases"] and before["Attention"]["canvases"][0][3] > 0, before["Attention"]
    assert "[MASK]" in before["Masking"]["text"] or before["Masking"]["svgs"], before["Masking"]
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_timeout(1500)
    page.reload(wait_until="domcontentloaded")
    page.wait_for_function(KERNEL_READY, arg=path, timeout=TIMEOUT_MS, polling=250)
    after_reload = drawn_per_tab(page)
    assert after_reload == before
    second = lab_context.new_page()
    try:
        open_in_lab(second, lab_server, path)
        assert drawn_per_tab(second) == before
        assert second.evaluate(STATIC_STATE)["shown"] == 0  # live views hide their static copies
    finally:
        second.close()
    assert not page.errors, page.errors


@pytest.mark.parametrize("app", ["lab", "notebook7"])
def test_a_saved_notebook_reopened_without_its_kernel_shows_every_tab(page, lab_server, lab_context, app):
    path = write_notebook(lab_server, f"reopened_{app}.ipynb")
    open_in_lab(page, lab_server, path, app)
    run_all(page)
    assert page.evaluate(STATIC_STATE)["shown"] == 0
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_timeout(1500)
    delete_sessions(lab_context, lab_server)  # the kernel is gone: no widget model survives
    open_in_lab(page, lab_server, path, app)  # a fresh kernel that knows none of the saved widgets
    page.wait_for_timeout(3000)
    state = page.evaluate(STATIC_STATE)
    assert state["shown"] == 1 and not state["errors"], state
    tabs = {tab["tab"]: tab for tab in state["tabs"]}
    assert list(tabs) == ["attention", "masking", "architecture", "training", "device"]
    assert_every_tab_drawn(tabs)
    assert "layer 2" in tabs["attention"]["text"], "the copy shows the figure as the kernel left it"
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"reopened_without_kernel_{app}.png"), full_page=True)


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


@pytest.mark.parametrize("execute, tool", [(False, "nbconvert"), (True, "nbconvert"), (False, "bertviz-lab html"),
                                           (True, "bertviz-lab html")],
                         ids=["saved", "executed", "offline-page-saved", "offline-page-executed"])
def test_nbconvert_html_shows_every_figure_offline(page, lab_server, lab_context, execute, tool):
    name = f"converted_{'executed' if execute else 'saved'}_{tool.split()[-1]}"
    path = write_notebook(lab_server, f"{name}.ipynb")
    notebook = lab_server.root / path
    if not execute:  # a notebook saved by JupyterLab after a run
        open_in_lab(page, lab_server, path)
        run_all(page)
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_timeout(1500)
    if tool == "nbconvert":
        html = nbconvert(notebook, execute)
    else:  # the same page without nbconvert's CDN scripts
        html = notebook_to_html(notebook, notebook.with_name(f"{name}.html"), execute=execute)
    first = len(lab_context.requested)
    page.goto(html.as_uri(), wait_until="load")
    page.wait_for_timeout(1500)
    state = page.evaluate(STATIC_STATE)
    assert state["shown"] == 1 and not state["errors"], state
    tabs = {tab["tab"]: tab for tab in state["tabs"]}
    assert_every_tab_drawn(tabs)
    assert "layer 2" in tabs["attention"]["text"]
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    assert_offline(lab_context.requested[first:], TEMPLATE_ASSETS if tool == "nbconvert" else ())


def test_notebook_7_renders_the_workbench(page, lab_server):
    path = write_notebook(lab_server, "notebook7.ipynb")
    open_in_lab(page, lab_server, path, "notebook7")
    run_all(page)
    drawn = drawn_per_tab(page)
    assert drawn["Attention"]["canvases"] and drawn["Attention"]["canvases"][0][3] > 0, drawn
    assert page.evaluate(STATIC_STATE)["shown"] == 0


def test_the_export_button_writes_a_file(page, lab_server):
    path = write_notebook(lab_server, "export.ipynb")
    open_in_lab(page, lab_server, path)
    run_all(page)
    figures = lab_server.root / "notebooks" / "bertviz_figures"
    before = set(figures.glob("*")) if figures.exists() else set()
    workbench(page).locator("button:has-text('export')").first.click()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (set(figures.glob("*.svg")) - before):
        time.sleep(0.3)
    written = sorted(set(figures.glob("*.svg")) - before)
    assert written, "no figure was written"
    assert written[0].read_text().startswith("<svg") and written[0].stat().st_size > 1000
