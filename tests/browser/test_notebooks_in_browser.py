"""Every notebook, run top to bottom in JupyterLab in a real (headless) Chromium, offline, checked on the rendered page.

One JupyterLab server serves a temporary copy of notebooks/ and configs/ (conftest.py). For each notebook: delete the
old kernel sessions, open it, wait for an idle kernel, run all cells, wait until every code cell shows [n], then check
the DOM: no error outputs, what the notebook must draw (heatmap, head view, model view, masking colours, loss curve,
mermaid and graphviz diagrams), no JavaScript errors, and no request to any host but 127.0.0.1. A screenshot of each
notebook goes to screenshots/ (git-ignored); with BERTVIZ_LAB_SCREENSHOTS=docs/images the README's three pictures are
written there too (tools/screenshots.py).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from browser_lab import (
    CONTENT_BOX,
    DRAW_TIMEOUT_MS,
    HEATMAP_DRAWN,
    MASK_CHIPS,
    NOTEBOOK_TO_TOP,
    README_IMAGES_ENV,
    REPO,
    SCREENSHOTS,
    SVG_IMAGE,
    Run,
    allowed_url,
    assert_no_error_outputs,
    open_and_run,
    wait_for,
)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

NOTEBOOKS = sorted(path.name for path in (REPO / "notebooks").glob("*.ipynb"))
RUN_TIMEOUT_MS = 180_000  # open + run-all per notebook on the shared 2-core machine (measured 4-80 s, 04 the slowest)
MASK_RGB = "rgb(214, 39, 40)"  # COLORS["mask"] = #d62728

CHECKS: dict[str, Callable[["Run"], None]] = {}


def check(prefix: str):
    """Register the rendered-page checks of the notebook whose name starts with `prefix`."""
    def register(function):
        CHECKS[prefix] = function
        return function
    return register


# ---------------------------------------------------------------------------------------------------------------
# Per notebook


def heatmap_of(panel: Any) -> Any:
    """The live heatmap (the static copy holds the same SVG, but not this div)."""
    return panel.locator("div.bvl-heatmap-view").first


def read_heatmap(run: Run, panel: Any) -> dict:
    """Wait until the panel's heatmap shows a drawing with cells; its title and size."""
    heat = heatmap_of(panel)
    heat.wait_for(state="attached", timeout=DRAW_TIMEOUT_MS)
    drawn = wait_for(run, "the heatmap has no cells",
                     lambda: (d := heat.evaluate(HEATMAP_DRAWN))["rows"] > 1 and d["cells"] and d)
    assert drawn["cols"] > 1, drawn
    return drawn


def read_cells(run: Run, panel: Any) -> None:
    """Hover over a cell, then the arrow keys: the tooltip names the cell's query and key and gives its weight."""
    heat = heatmap_of(panel)
    drawn = read_heatmap(run, panel)
    cells = heat.locator("svg.bvl-heatmap .bvl-cells")
    # the box of the drawing on screen (None for an instant while a late redraw replaces the figure)
    box = wait_for(run, "the heatmap's cells have no box on screen", cells.bounding_box)
    cell = box["width"] / drawn["cols"]
    cells.hover(position={"x": 1.5 * cell, "y": 2.5 * cell})  # row 2, column 1
    read = wait_for(run, "hover shows no cell", lambda: (d := heat.evaluate(HEATMAP_DRAWN))["cell"] and d)
    assert read["cell"] == [2, 1], read
    lines = read["tip"].split("\n")
    assert lines[0].startswith("query ") and lines[1].startswith("key ") and lines[2] == "weight " + read["weight"]
    assert 0 <= float(read["weight"]) <= 1, read
    run.page.mouse.move(0, 0)  # off the figure: the tooltip goes
    wait_for(run, "the tooltip stays after the pointer left", lambda: heat.evaluate(HEATMAP_DRAWN)["cell"] is None)
    cells.focus()
    for key in ("ArrowDown", "ArrowRight", "ArrowRight"):  # focus reads the first cell, the keys move from there
        run.page.keyboard.press(key)
    read = wait_for(run, "the arrow keys read no cell", lambda: (d := heat.evaluate(HEATMAP_DRAWN))["cell"] and d)
    assert read["cell"] == [1, 2] and read["tip"].endswith("weight " + read["weight"]), read
    run.page.keyboard.press("Escape")


def choose_another_layer(run: Run, panel: Any) -> None:
    """Pick another layer in the panel's "layer" dropdown: the heatmap's data and title must follow."""
    before = read_heatmap(run, panel)
    select = panel.locator(".widget-dropdown").filter(
        has=run.page.locator("label", has_text=re.compile(r"^layer$"))).locator("select").first
    options = wait_for(run, "the layer selector offers fewer than two layers",
                       lambda: len(texts := select.locator("option").all_inner_texts()) > 1 and texts)
    current = select.evaluate("(s) => s.options[s.selectedIndex].textContent")
    other = next(o for o in reversed(options) if o != current)
    select.select_option(label=other)
    heat = heatmap_of(panel)
    after = wait_for(run, f"choosing layer {other} (was {current}) did not draw that layer "
                          f"(title still {before['title']!r})",
                     lambda: (d := heat.evaluate(HEATMAP_DRAWN))["title"].startswith(f"layer {other} ") and d, 20)
    assert after["cells"] and after["draws"] > before["draws"], after
    figure_title = heat.locator("svg.bvl-heatmap text.bvl-title").text_content()
    assert figure_title == after["title"], f"the drawing says {figure_title!r}, the view {after['title']!r}"


def check_attention_panel(run: Run) -> None:
    """The first AttentionPanel: heatmap drawn, another layer changes its data, head view and model view drawn,
    and the heatmap still follows the layer after the views were switched."""
    panel = run.outputs(".widget-toggle-button:text-is('head view')").first
    panel.wait_for(timeout=DRAW_TIMEOUT_MS)

    def show(view: str) -> None:
        panel.locator(".widget-toggle-button", has_text=re.compile(f"^{view}$")).first.click()

    with run.step("attention panel: heatmap drawn"):
        show("heatmap")
        read_heatmap(run, panel)
    with run.step("attention panel: hover and the arrow keys read the heatmap's cells"):
        read_cells(run, panel)
    with run.step("attention panel: the layer selector changes the heatmap"):
        choose_another_layer(run, panel)
    with run.step("attention panel: head view drawn"):
        show("head view")
        lines = panel.locator(".bvl-head-view svg line")
        lines.first.wait_for(state="attached", timeout=DRAW_TIMEOUT_MS)
        tokens = panel.locator(".bvl-head-view svg text.bvl-token").count()
        assert lines.count() > 0 and tokens > 2, f"head view: {lines.count()} lines, {tokens} tokens"
    with run.step("attention panel: model view drawn"):
        show("model view")
        thumbs = panel.locator("div.bvl-model-view svg g.bvl-thumb")
        thumbs.first.wait_for(state="attached", timeout=DRAW_TIMEOUT_MS)
        drawn = panel.locator("div.bvl-model-view svg g.bvl-thumb image").count()
        assert thumbs.count() > 1 and drawn == thumbs.count(), f"model view: {thumbs.count()} heads, {drawn} images"
    with run.step("attention panel: back on the heatmap, the layer selector still changes it"):
        show("heatmap")
        choose_another_layer(run, panel)


@check("00_")
def check_workbench(run: Run) -> None:
    check_attention_panel(run)
    with run.step("workbench: tabs and the attention heatmap"):
        bench = run.outputs(".widget-tab").first
        bench.wait_for(timeout=DRAW_TIMEOUT_MS)
        bench.locator("div.bvl-heatmap-view svg.bvl-heatmap .bvl-cells").first.wait_for(state="attached",
                                                                                         timeout=DRAW_TIMEOUT_MS)
        tabs = [t.strip() for t in bench.locator(".lm-TabBar-tab").all_inner_texts()]
        assert tabs[:5] == ["Attention", "Masking", "Architecture", "Training", "Device"], tabs
        run.pictures["workbench_attention"] = bench


@check("02_")
def check_attention(run: Run) -> None:
    check_attention_panel(run)
    with run.step("the 512-token panel draws its heatmap with every token"):
        def long_heatmaps() -> list[int]:
            heatmaps = run.page.locator("div.bvl-heatmap-view")
            return [rows for i in range(heatmaps.count())
                    if (rows := int(heatmaps.nth(i).get_attribute("data-rows") or 0)) >= 500]
        sizes = wait_for(run, "no heatmap of the long input (>= 500 rows)", long_heatmaps)
        assert max(sizes) <= 512, sizes


@check("03_")
def check_masking(run: Run) -> None:
    with run.step("masking preview: [MASK] colour on masked tokens"):
        chips = wait_for(run, "the masking preview shows no [MASK]-coloured token",
                         lambda: (c := run.page.evaluate(MASK_CHIPS))["maskTokens"] > 0 and c)
        assert chips["chips"] > chips["mask"] > 0 and chips["fills"] == [MASK_RGB], chips


@check("04_")
def check_pretraining(run: Run) -> None:
    with run.step("live loss curves: the MLM loss drawn as a line of more than one point, with axis titles"):
        curves = run.outputs(".bvl-loss-curves").first
        series = curves.locator('polyline.bvl-series[data-key="train_mlm_loss"]').first
        series.wait_for(state="attached", timeout=DRAW_TIMEOUT_MS)
        points = wait_for(run, "the live MLM loss curve has no more than one point",
                          lambda: (n := int(series.get_attribute("data-n") or 0)) > 1 and n)
        assert len((series.get_attribute("points") or "").split()) == points
        titles = [t.strip() for t in curves.locator(".bvl-axis-title").all_text_contents()]
        assert "step" in titles and "loss" in titles, titles
        status = curves.locator(".bvl-curves-status").first.text_content() or ""
        assert re.search(r"step \d+ of \d+", status), status
        run.pictures["loss_curves"] = curves


@check("05_")
def check_architecture(run: Run) -> None:
    page = run.page
    with run.step("mermaid rendered as an SVG image"):
        # JupyterLab renders a text/vnd.mermaid output (or a ```mermaid fence) into <img src="data:image/svg+xml,...">
        mermaid = page.locator(".jp-OutputArea-output .jp-RenderedMermaid img[src^='data:image/svg+xml']").first
        mermaid.wait_for(state="attached", timeout=DRAW_TIMEOUT_MS)
        image = wait_for(run, "the mermaid image did not load",
                         lambda: (i := mermaid.evaluate(SVG_IMAGE))["loaded"] and i)
        assert image["svg"] and "BERTEmbeddings" in image["text"] and image["width"] > 300 and image["height"] > 50, \
            {k: v for k, v in image.items() if k != "text"}
        run.pictures["architecture"] = run.outputs(".jp-RenderedMermaid").first
    with run.step("graphviz SVG"):
        # a graphviz.Digraph's image/svg+xml output; Lab shows it as an <img> too
        graphviz = page.locator(".jp-OutputArea-output[data-mime-type='image/svg+xml'] img").first
        graphviz.wait_for(state="attached", timeout=DRAW_TIMEOUT_MS)
        image = wait_for(run, "the graphviz image did not load",
                         lambda: (i := graphviz.evaluate(SVG_IMAGE))["loaded"] and i)
        assert image["svg"] and image["nodes"] > 3 and "BERTLayer" in image["text"], \
            {k: v for k, v in image.items() if k != "text"}


# ---------------------------------------------------------------------------------------------------------------


def save_screenshots(run: Run, readme: bool) -> list[Path]:
    """The whole notebook (viewport stretched to its height) into screenshots/; the README's pictures as well, and
    into $BERTVIZ_LAB_SCREENSHOTS when `readme` (only from a notebook that passed)."""
    page = run.page
    SCREENSHOTS.mkdir(exist_ok=True)
    saved = []
    page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
    page.wait_for_timeout(300)
    viewport = page.viewport_size
    overflow = page.evaluate(NOTEBOOK_TO_TOP)
    page.set_viewport_size({"width": viewport["width"], "height": min(viewport["height"] + overflow, 16000)})
    page.wait_for_timeout(800)  # Lab relayouts the outputs
    page.evaluate(NOTEBOOK_TO_TOP)
    page.wait_for_timeout(200)
    target = SCREENSHOTS / f"{Path(run.name).stem}.png"
    page.screenshot(path=str(target))
    saved.append(target)
    folder = os.environ.get(README_IMAGES_ENV)
    for picture, locator in run.pictures.items():
        target = SCREENSHOTS / f"{picture}.png"
        locator.scroll_into_view_if_needed()
        page.screenshot(path=str(target), clip=locator.evaluate(CONTENT_BOX))
        saved.append(target)
        if folder and readme:
            destination = Path(folder) if Path(folder).is_absolute() else REPO / folder
            destination.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(target, destination / target.name)
            saved.append(destination / target.name)
    page.set_viewport_size(viewport)
    return saved


def test_every_check_has_its_notebook():
    missing = [prefix for prefix in CHECKS if not any(name.startswith(prefix) for name in NOTEBOOKS)]
    assert not missing, f"no notebook for the checks {missing} in {NOTEBOOKS}"


def test_the_browser_cannot_reach_other_hosts(lab_context):
    """The guard behind the offline proof: a request to another host fails inside this machine and is recorded.
    192.0.2.1 is TEST-NET-1 and .invalid never resolves: nothing could answer even without the guard."""
    page = lab_context.new_page()
    first = len(lab_context.requested)
    try:
        for url in ("http://192.0.2.1/", "http://bertviz-lab.invalid/"):
            # fetch, not goto: Chromium's error page would keep reloading the address
            answer = page.evaluate("(url) => fetch(url).then(() => 'answered', (e) => 'failed: ' + e)", url)
            assert answer.startswith("failed"), f"{url}: {answer}"
    finally:
        page.close()
    recorded = lab_context.requested[first:]
    assert "http://192.0.2.1/" in recorded and "http://bertviz-lab.invalid/" in recorded, recorded
    assert not any(allowed_url(url) for url in recorded), recorded


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_in_browser(name, page, lab_server, lab_context):
    copy = lab_server.root / "notebooks" / name
    original = copy.read_bytes()
    first_request = len(lab_context.requested)
    run = Run(page, name)
    started, passed = time.monotonic(), False
    try:
        opened = open_and_run(page, lab_server, name, timeout_ms=RUN_TIMEOUT_MS)
        run.timings.update(opened.timings)
        specific = next((f for prefix, f in CHECKS.items() if name.startswith(prefix)), None)
        if specific is not None:
            started_checks = time.monotonic()
            specific(run)
            run.timings["checks"] = time.monotonic() - started_checks
        with run.step("no error outputs after the interactions"):
            assert_no_error_outputs(page, opened.cells, name)
        with run.step("offline: every request and websocket went to 127.0.0.1"):
            requested = lab_context.requested[first_request:] + run.sockets
            foreign = sorted({url for url in requested if not allowed_url(url)})
            assert not foreign, f"the browser asked for other hosts: {foreign}"
            assert any(url.startswith(lab_server.url + "/") for url in requested), "no request was recorded"
            assert any(url.startswith(f"ws://127.0.0.1:{lab_server.port}/api/kernels/") for url in run.sockets), \
                f"no kernel websocket on 127.0.0.1 ({run.sockets})"
        with run.step("the notebook copy was not saved (autosave off)"):
            assert copy.read_bytes() == original, f"{copy} changed"
        problems = run.failures + run.console
        assert not problems, f"{name}:\n" + "\n".join(problems)
        passed = True
    finally:
        try:
            saved = save_screenshots(run, readme=passed)
            shown = [str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p) for p in saved]
            print(f"\n{name}: screenshots {shown}")
        except Exception as error:  # a failing notebook should still report its own failure, not this one
            print(f"\n{name}: no screenshot ({error})")
        print(f"{name}: {', '.join(f'{k} {v:.1f} s' for k, v in run.timings.items())}; "
              f"total {time.monotonic() - started:.1f} s")
