"""A text of 512 tokens in a real browser: the heatmap zoomed to 32 tokens with the keyboard (every token of the
window labelled, clipped [CLS]/[SEP] cells marked and named by the colour bar), the window following the arrow keys,
the mouse wheel zooming out, Escape showing all; an export from the kernel shows the window on screen; the head view
draws a window of rows and its arrow keys move the selected query. JupyterLab in headless Chromium, offline, MiniLM.
Screenshots (light and dark) go to screenshots/; with BERTVIZ_LAB_SCREENSHOTS=docs/images the README's
heatmap_zoomed.png and head_view_window.png are written there too."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from browser_lab import CONTENT_BOX, SCREENSHOTS, Run, copy_to_readme, open_and_run, set_theme, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

NAME = "long_texts_check.ipynb"
EXPORT = "long_texts_zoomed.svg"
CELLS = [
    """from bertviz_lab.widgets import AttentionPanel
from bertviz_lab.widgets.panels.models import default_model_and_tokenizer
model, tokenizer = default_model_and_tokenizer()
words = ("the quick brown fox jumps over the lazy dog while the cat watches from the warm window " * 60).split()
text = " ".join(words[:510])
while len(tokenizer.encode(text, max_length=10**6)) > 512:
    text = text.rsplit(" ", 1)[0]
panel = AttentionPanel(model=model, tokenizer=tokenizer, text=text)
# the head whose [CLS] column rises above the other tokens' weights in the most rows: clipped cells to see
attention = panel.trace.attentions
def clipped_rows(layer, head):
    matrix = attention[layer][0, head]
    return int((matrix[1:32, 0] > matrix[1:-1, 1:-1].max()).sum())
panel.layer.value, panel.head.value = max(((l, h) for l in range(len(attention)) for h in range(attention[0].shape[1])),
                                          key=lambda lh: clipped_rows(*lh))
panel""",
    "pass  # replaced by the export the test runs",
]

# The live heatmap as drawn: the div's data- attributes (heatmap.js) and what the figure holds in its window.
HEATMAP = """(el) => {
  const svg = el.querySelector('svg.bvl-heatmap');
  const area = svg && svg.querySelector('.bvl-cells');
  const label = (t) => t.firstChild ? t.firstChild.nodeValue : '';
  const mark = svg && svg.querySelector('path.bvl-clipped-mark[data-cells]');
  const over = svg && svg.querySelector('.bvl-colorbar-overflow-label');
  const tip = el.querySelector('.bvl-tooltip');
  return {title: el.dataset.title || '', window: el.dataset.window || '', draws: Number(el.dataset.draws || 0),
          rows: Number(el.dataset.rows || 0),
          area: area ? [area.dataset.rows, area.dataset.cols, area.dataset.row0, area.dataset.col0].map(Number) : [],
          queries: svg ? [...svg.querySelectorAll('text.bvl-query')].map(label) : [],
          keys: svg ? [...svg.querySelectorAll('text.bvl-key')].map(label) : [],
          clipped: mark ? Number(mark.dataset.cells) : 0, overflow: over ? over.textContent : '',
          cell: el.dataset.cellRow === undefined ? null : [Number(el.dataset.cellRow), Number(el.dataset.cellCol)],
          tip: tip && getComputedStyle(tip).display !== 'none' ? tip.textContent : '',
          focused: document.activeElement === area, top: area ? Number(area.dataset.top) : 0,
          ring: area ? getComputedStyle(area).outlineStyle : ''};
}"""

HEAD_VIEW = """(el) => {
  const svg = el.querySelector('svg.bvl-head-view');
  if (!svg) return {query: -2, first: -1, height: 0, queries: [], focused: -1, title: ''};
  const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset : {};
  return {query: Number(svg.dataset.query), first: Number(svg.dataset.first),
          height: Number(svg.getAttribute('height')),
          queries: [...svg.querySelectorAll('text.bvl-query')].map((t) => Number(t.dataset.index)),
          focused: focused.side === 'query' ? Number(focused.index) : -1, title: el.dataset.title || '',
          offWindow: [...svg.querySelectorAll('text.bvl-off-window')].map((t) => t.textContent)};
}"""


def run_cell(run: Run, index: int, source: str) -> None:
    """Put `source` in cell `index` and run it; wait until its prompt counts it."""
    run.page.evaluate("""([index, source]) => { const nb = window.jupyterapp.shell.currentWidget.content;
                         nb.activeCellIndex = index; nb.activeCell.model.sharedModel.setSource(source);
                         nb.activeCell.model.outputs.clear(); nb.activeCell.model.executionCount = null; }""",
                      [index, source])
    run.page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
    wait_for(run, f"cell {index} did not run", lambda: run.page.evaluate(
        """(index) => { const c = window.jupyterapp.shell.currentWidget.content.widgets[index];
                        return c.model.executionCount !== null && /\\[\\d+\\]/.test(
                          c.node.querySelector('.jp-InputPrompt').textContent); }""", index))


def screenshot(run: Run, locator: Any, name: str, pictures: list[Path]) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    locator.scroll_into_view_if_needed()
    target = SCREENSHOTS / f"{name}.png"
    run.page.screenshot(path=str(target), clip=locator.evaluate(CONTENT_BOX))
    pictures.append(target)


def test_512_tokens_zoomed_heatmap_and_windowed_head_view(page, lab_server):
    page.set_viewport_size({"width": 1600, "height": 1200})
    run = Run(page, NAME)
    pictures: list[Path] = []
    open_and_run(page, lab_server, NAME, CELLS)
    page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
    panel = run.outputs("div.bvl-heatmap-view").first
    heat = panel.locator("div.bvl-heatmap-view").first
    drawn = wait_for(run, "the heatmap did not draw 512 tokens",
                     lambda: (d := heat.evaluate(HEATMAP))["rows"] == 512 and d["area"] and d)
    assert drawn["window"] == "" and len(drawn["keys"]) < 64, drawn["keys"][:5]

    with run.step("the keyboard zooms the heatmap to 32 tokens, every one labelled, clipped cells marked"):
        heat.locator("svg .bvl-cells").focus()  # reads the first cell: (0, 0)
        wait_for(run, "the focus did not read cell (0, 0)", lambda: heat.evaluate(HEATMAP)["cell"] == [0, 0])
        for size in (256, 128, 64, 32):
            page.keyboard.press("+")
            zoomed = wait_for(run, f"+ did not zoom to {size} tokens", lambda: (
                d := heat.evaluate(HEATMAP))["window"] == f"0,{size},0,{size}" and d)
        assert zoomed["area"] == [32, 32, 0, 0], zoomed["area"]
        assert zoomed["title"].endswith("queries 0–31 · keys 0–31 of 512"), zoomed["title"]
        assert len(zoomed["queries"]) == len(zoomed["keys"]) == 32, (zoomed["queries"], zoomed["keys"])
        assert [q.split("·")[0] for q in zoomed["queries"]] == [str(p) for p in range(32)], zoomed["queries"]
        assert zoomed["queries"][0] == "0·[CLS]" and zoomed["keys"] == zoomed["queries"], zoomed["keys"]
        assert zoomed["focused"] and zoomed["ring"] != "none", zoomed  # the focus came back, with its ring
        # [CLS] is clipped (the default): its cells above the colour scale are marked, the bar names their max
        assert zoomed["clipped"] > 0 and re.fullmatch(r"clipped, max 0\.\d+", zoomed["overflow"]), zoomed
        tokens = [q.split("·", 1)[1] for q in zoomed["queries"]]
        screenshot(run, panel, "heatmap_zoomed", pictures)

    with run.step("an export from the kernel shows the window on screen"):
        run_cell(run, 1, f"panel.save({EXPORT!r})")
        saved = (lab_server.root / "notebooks" / EXPORT).read_text(encoding="utf-8")
        root = ET.fromstring(saved)
        area = next(n for n in root.iter() if n.get("class") == "bvl-cells")
        assert [area.get(f"data-{k}") for k in ("rows", "cols", "row0", "col0")] == ["32", "32", "0", "0"]
        text = {"bvl-query": [], "bvl-key": []}
        for node in root.iter("{http://www.w3.org/2000/svg}text"):
            for name in text:
                if name in (node.get("class") or "").split():
                    text[name].append(node.text or "")
        assert text["bvl-query"] == zoomed["queries"] and text["bvl-key"] == zoomed["keys"], text
        assert "clipped, max" in saved and 'class="bvl-clipped-mark"' in saved

    with run.step("hover reads a clipped cell's true weight, beyond the colour scale"):
        heat.locator("svg .bvl-cells").focus()
        page.keyboard.press("ArrowDown")  # (1, 0): the query after [CLS] reading [CLS]
        read = wait_for(run, "ArrowDown did not read cell (1, 0)",
                        lambda: (d := heat.evaluate(HEATMAP))["cell"] == [1, 0] and d)
        assert read["tip"].startswith(f"query 1·{tokens[1]}\nkey 0·[CLS]\nweight "), read["tip"]
        weight = float(read["tip"].split("weight ")[1].split()[0])
        assert ("beyond the colour scale" in read["tip"]) == (weight > read["top"]), (read["tip"], read["top"])

    with run.step("the arrow keys move past the window's edge and the window follows"):
        for _ in range(31):
            page.keyboard.press("ArrowDown")
        moved = wait_for(run, "the window did not follow the cell to row 32",
                         lambda: (d := heat.evaluate(HEATMAP))["window"] == "1,33,0,32" and d["cell"] == [32, 0]
                         and d)
        assert moved["queries"][-1].startswith("32·") and len(moved["queries"]) == 32, moved["queries"]

    with run.step("the wheel over the cells zooms out, Escape shows all tokens"):
        box = heat.locator("svg .bvl-cells").bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.wheel(0, 120)
        out = wait_for(run, "the wheel did not zoom out to 64 tokens",
                       lambda: (d := heat.evaluate(HEATMAP))["area"][:2] == [64, 64] and d)
        assert len(out["queries"]) >= 32, out["queries"]  # at 9 px a cell, every other label or more
        heat.locator("svg .bvl-cells").focus()
        page.keyboard.press("Escape")
        wait_for(run, "Escape did not show all 512 tokens",
                 lambda: (d := heat.evaluate(HEATMAP))["window"] == "" and d["area"][:2] == [512, 512])

    with run.step("the zoom bar's typed range and buttons"):
        bar = panel.locator(".bvl-zoom-bar")
        bar.get_by_label("first query position shown").fill("100")
        bar.get_by_label("last query position shown").fill("131")
        bar.get_by_label("last query position shown").press("Enter")
        typed = wait_for(run, "typing 100–131 did not show those queries",
                         lambda: (d := heat.evaluate(HEATMAP))["window"] == "100,132,0,512" and d)
        assert typed["area"] == [32, 512, 100, 0], typed["area"]  # keys stay whole
        assert [q.split("·")[0] for q in typed["queries"]] == [str(p) for p in range(100, 132)], typed["queries"]
        assert "queries 100–131 · keys 0–511 of 512" in typed["title"], typed["title"]
        bar.get_by_label("show all tokens").click()
        wait_for(run, "the reset button did not show all tokens",
                 lambda: heat.evaluate(HEATMAP)["window"] == "")
        bar.get_by_label("zoom in").click()
        wait_for(run, "the zoom-in button did not zoom", lambda: heat.evaluate(HEATMAP)["area"][:2] == [256, 256])
        bar.get_by_label("show all tokens").click()
        wait_for(run, "the reset button did not show all tokens",
                 lambda: heat.evaluate(HEATMAP)["window"] == "")

    with run.step("the zoomed heatmap in JupyterLab Dark"):
        heat.locator("svg .bvl-cells").focus()
        wait_for(run, "the focus did not read cell (0, 0)", lambda: heat.evaluate(HEATMAP)["cell"] == [0, 0])
        for size in (256, 128, 64, 32):
            page.keyboard.press("+")
            wait_for(run, f"+ did not zoom to {size}",
                     lambda: heat.evaluate(HEATMAP)["area"][:2] == [size, size])
        set_theme(page, "dark")
        screenshot(run, panel, "heatmap_zoomed_dark", pictures)
        set_theme(page, "light")

    head = panel.locator("div.bvl-head-view").first
    with run.step("the head view draws a window of rows; its arrow keys move the selected query"):
        panel.locator(".widget-toggle-button", has_text=re.compile("^head view$")).first.click()
        shown = wait_for(run, "the head view did not draw", lambda: (d := head.evaluate(HEAD_VIEW))["queries"]
                         and d)
        assert len(shown["queries"]) == 32 and shown["height"] < 1000, shown
        start = shown["query"]
        assert start in shown["queries"], shown
        head.locator(f"svg text.bvl-query[data-index='{start}']").focus()
        for _ in range(40):
            page.keyboard.press("ArrowDown")
        moved = wait_for(run, "40 × ArrowDown did not move the query and its window",
                         lambda: (d := head.evaluate(HEAD_VIEW))["query"] == start + 40 and d["focused"] == start
                         + 40 and d)
        assert moved["first"] <= start + 40 < moved["first"] + 32 and moved["first"] > 0, moved
        assert f"queries {moved['first']}–{moved['first'] + 31} of 512" in moved["title"], moved["title"]
        assert any(label.startswith("↑") for label in moved["offWindow"]), moved["offWindow"]
        head.evaluate("() => document.activeElement.blur()")  # every line of the window, not the focused query's
        wait_for(run, "the head view still singles out the focused query's lines", lambda: head.evaluate(
            "(el) => !el.querySelector('svg.bvl-head-view.bvl-hovering')"))
        screenshot(run, panel, "head_view_window", pictures)
        set_theme(page, "dark")
        screenshot(run, panel, "head_view_window_dark", pictures)
        set_theme(page, "light")

    assert not run.failures, "\n".join(run.failures)
    copy_to_readme([picture for picture in pictures if not picture.stem.endswith("_dark")])
