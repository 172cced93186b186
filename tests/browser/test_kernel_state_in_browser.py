"""A panel whose kernel is gone says so: one notice line, its controls disabled, its figure still there and still
read by hover; after a restart, running the cell again gives a panel that works. JupyterLab in headless Chromium.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from browser_lab import (
    KERNEL_NOTICE,
    SCREENSHOTS,
    kernel_prints,
    live_heatmap_shows,
    open_and_run,
    run_all,
)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

TIMEOUT_MS = 120_000
CELLS = ["from bertviz_lab.widgets import Workbench\n"
         "bench = Workbench(text='The cat sat on the mat because it was warm.', layer=1, head=2)\n"
         "bench"]
NOTICE_SHOWN = "(words) => { const s = (" + KERNEL_NOTICE + ")(); " \
               "return !!s && s.notices.length === 1 && s.notices[0].visible && s.notices[0].text.includes(words); }"
TOOLTIP = """() => {
  const view = [...document.querySelectorAll('.jp-OutputArea-output .bvl-heatmap-view')]
    .find((v) => v.offsetParent !== null);
  const tip = view && view.querySelector('.bvl-tooltip');
  if (!tip || getComputedStyle(tip).display === 'none' || !tip.textContent) return false;
  return {text: tip.textContent, weight: view.dataset.weight || '', row: view.dataset.cellRow || '',
          col: view.dataset.cellCol || ''};
}"""


def hover_a_cell(page: Any) -> dict:
    """Move the pointer over the live heatmap's cells and wait for its tooltip."""
    cells = page.locator(".jp-OutputArea-output .bvl-heatmap-view .bvl-cells").first
    box = cells.bounding_box()
    assert box and box["width"] > 0, "the live heatmap has no cell area"
    page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.4)
    return page.wait_for_function(TOOLTIP, timeout=30_000, polling=100).json_value()


def test_a_panel_without_its_kernel_says_so_disables_its_controls_and_still_reads_its_figure(page, lab_server):
    open_and_run(page, lab_server, "kernel_shut_down.ipynb", CELLS)
    shown = live_heatmap_shows(page, "layer 1 · head 2 ·")
    before = page.evaluate(KERNEL_NOTICE)
    assert before["notices"] == [] and not before["gone"] and before["controls"] > 5, before
    traced = json.loads(kernel_prints(page, "import json; print(json.dumps(bench.attention.trace.attentions[1][0, 2]"
                                            ".tolist()))"))  # what the kernel recorded, read while it still runs
    page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    page.wait_for_function(NOTICE_SHOWN, arg="The kernel is not running", timeout=TIMEOUT_MS, polling=250)
    state = page.evaluate(KERNEL_NOTICE)
    assert state["gone"] and state["notices"][0]["role"] == "status", state
    assert state["enabled"] == [], f"controls still enabled without a kernel: {state['enabled']}"
    assert state["disabled"] == state["controls"] > before["disabled"], state
    assert live_heatmap_shows(page, shown["title"]) == shown  # the figure stays as it was
    tip = hover_a_cell(page)
    assert "weight" in tip["text"] and tip["weight"], tip
    assert abs(float(tip["weight"]) - traced[int(tip["row"])][int(tip["col"])]) <= 1e-3, tip  # exact, no kernel
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "kernel_shut_down.png"), full_page=True)
    assert not page.errors, page.errors


def test_after_a_restart_the_panel_says_so_and_running_the_cell_again_gives_a_working_one(page, lab_server):
    open_and_run(page, lab_server, "kernel_restarted.ipynb", CELLS)
    live_heatmap_shows(page, "layer 1 · head 2 ·")
    page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.restartKernel()")
    page.wait_for_function(NOTICE_SHOWN, arg="The kernel restarted", timeout=TIMEOUT_MS, polling=250)
    assert page.evaluate(KERNEL_NOTICE)["enabled"] == []
    run_all(page)  # the cell again: a new panel on the new kernel
    live_heatmap_shows(page, "layer 1 · head 2 ·")
    state = page.evaluate(KERNEL_NOTICE)
    assert state["notices"] == [] and not state["gone"] and state["enabled"], state
    page.locator(".jp-OutputArea-output .widget-dropdown:has(label:text-is('layer')) select").first \
        .select_option(label="3")
    live_heatmap_shows(page, "layer 3 · head 2 ·")  # the new kernel answers
    assert not page.errors, page.errors
