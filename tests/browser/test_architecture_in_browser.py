"""The architecture view in JupyterLab, in headless Chromium, offline: "fit" shows the whole diagram in both
directions (before, the fitted width left most of a tall diagram below the fold), and mermaid gets the same view as
Graphviz: the front end's mermaid drawing is shown with the same zoom buttons, fit and pan, and its own output is
hidden. Screenshots of both go to screenshots/architecture_*.png (light and dark)."""

from __future__ import annotations

from typing import Any

import pytest
from browser_lab import (
    CONTENT_BOX,
    SCREENSHOTS,
    allowed_url,
    open_and_run,
    set_theme,
)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium"), pytest.mark.needs_program("dot")]

CELLS = [
    "import bertviz_lab as bv\n"
    "from bertviz_lab.widgets import ArchitecturePanel\n"
    "model = bv.BERTForPreTraining(bv.BERTConfig.tiny())\n"
    "graphviz = ArchitecturePanel(model, renderer='graphviz', depth=3)\n"
    "graphviz",
    "mermaid = ArchitecturePanel(model, renderer='mermaid', depth=3)\n"
    "mermaid",
]

# The view's figure against its scrolling viewport: how much of it shows.
FIGURE_BOX = """(panel) => {
  const view = panel.querySelector('.bvl-diagram');
  const viewport = view.querySelector('.bvl-diagram-viewport');
  const figure = viewport.firstElementChild;
  const box = figure ? figure.getBoundingClientRect() : {width: 0, height: 0};
  return {shown: getComputedStyle(view).display !== 'none', tag: figure ? figure.tagName.toLowerCase() : '',
          width: box.width, height: box.height, viewWidth: viewport.clientWidth, viewHeight: viewport.clientHeight,
          scrollWidth: viewport.scrollWidth, scrollHeight: viewport.scrollHeight,
          loaded: figure && figure.tagName.toLowerCase() === 'img' ? figure.complete && figure.naturalWidth > 0 : true,
          readout: view.querySelector('.bvl-diagram-zoom').textContent,
          sourceShown: [...panel.querySelectorAll('.bvl-mermaid-source')].some((o) => o.offsetParent !== null),
          adopted: panel.classList.contains('bvl-mermaid-shown')};
}"""
WHOLE = "(b) => b.shown && b.width > 0 && b.scrollHeight <= b.viewHeight + 1 && b.scrollWidth <= b.viewWidth + 1"


def panel_box(panel: Any) -> dict:
    return panel.evaluate(FIGURE_BOX)


def wait_box(page: Any, panel: Any, condition: str, timeout_ms: int = 60_000) -> dict:
    page.wait_for_function(f"(panel) => ({condition})(({FIGURE_BOX})(panel))", arg=panel.element_handle(),
                           timeout=timeout_ms, polling=200)
    return panel_box(panel)


def click(panel: Any, text: str) -> None:
    panel.locator(".bvl-diagram-controls button", has_text=text).first.click()


def test_fit_shows_the_whole_diagram_and_mermaid_gets_the_same_view(page, lab_server, lab_context):
    first_request = len(lab_context.requested)
    open_and_run(page, lab_server, "architecture_view.ipynb", CELLS)
    panels = page.locator(".jp-OutputArea-output .bvl-panel").filter(has=page.locator(".bvl-diagram"))
    graphviz, mermaid = panels.nth(0), panels.nth(1)
    SCREENSHOTS.mkdir(exist_ok=True)

    # Graphviz: the first view fits the width with readable text, and the tall diagram scrolls
    before = wait_box(page, graphviz, "(b) => b.shown && b.tag === 'svg' && b.width > 0")
    assert before["scrollHeight"] > before["viewHeight"] + 1, before  # most of it below the fold
    click(graphviz, "fit")
    whole = wait_box(page, graphviz, WHOLE)
    assert whole["height"] < before["height"]
    graphviz.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "architecture_fit.png"), clip=graphviz.evaluate(CONTENT_BOX))
    click(graphviz, "width")
    wait_box(page, graphviz, f"(b) => Math.abs(b.width - {before['width']}) < 2")

    # mermaid: the front end's drawing, shown by the same view; its own output hidden
    drawn = wait_box(page, mermaid, "(b) => b.shown && b.tag === 'img' && b.loaded && b.adopted")
    assert not drawn["sourceShown"] and drawn["width"] > 200, drawn
    click(mermaid, "+")
    zoomed = wait_box(page, mermaid, f"(b) => b.width > {drawn['width']} * 1.2")
    assert zoomed["readout"] != drawn["readout"]
    click(mermaid, "fit")
    fitted = wait_box(page, mermaid, WHOLE)
    assert fitted["tag"] == "img" and not fitted["sourceShown"]
    mermaid.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "architecture_mermaid_fit.png"), clip=mermaid.evaluate(CONTENT_BOX))

    # dragging pans a view that scrolls
    click(mermaid, "width")
    wide = wait_box(page, mermaid, "(b) => b.scrollHeight > b.viewHeight + 1")
    viewport = mermaid.locator(".bvl-diagram-viewport")
    box = viewport.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2 - 150, steps=5)
    page.mouse.up()
    assert viewport.evaluate("(v) => v.scrollTop") > 0, wide

    set_theme(page, "dark")
    click(graphviz, "fit")
    wait_box(page, graphviz, WHOLE)
    graphviz.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "architecture_fit_dark.png"), clip=graphviz.evaluate(CONTENT_BOX))
    set_theme(page, "light")

    assert not page.errors, page.errors
    foreign = [url for url in lab_context.requested[first_request:] if not allowed_url(url)]
    assert not foreign, f"requests left the machine: {foreign}"
