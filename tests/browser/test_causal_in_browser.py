"""The Causal tab in JupyterLab, in headless Chromium, offline: the patching map, the logit lens and the FFN neurons
render from the kernel's drawings; hover and the keyboard show each cell's exact value as the kernel computed it; a
patching cell opens its layer in the attention panel below; the export button writes an SVG; axe-core finds no
serious violation in any tool in the light or the dark theme; after a page reload the tool redraws and a change made
there is drawn; a second tab shows the same tool and what it chooses reaches the first; and once the kernel is gone,
hover still reads the exact values from the page alone.

The model is a tiny random BERT with a masked-LM head and the packaged tokenizer (no network, no download).
Screenshots of each tool go to screenshots/causal_*.png (and, with BERTVIZ_LAB_SCREENSHOTS set, to the README's
pictures).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from browser_lab import (
    CONTENT_BOX,
    DOM_ERRORS,
    KERNEL_READY,
    SCREENSHOTS,
    copy_to_readme,
    kernel_prints,
    live_heatmap_shows,
    open_and_run,
    open_notebook,
    save_notebook,
    set_theme,
)
from test_accessibility_in_browser import AXE, RUN_AXE, SERIOUS

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

TIMEOUT_MS = 240_000
CELLS = [
    "import torch\n"
    "import bertviz_lab as bv\n"
    "from bertviz_lab.widgets import CausalPanel\n"
    "tokenizer = bv.BERTTokenizerFast.from_pretrained(bv.BERT_Weights.DEFAULT.path)\n"
    "torch.manual_seed(0)\n"
    "model = bv.BERTForMaskedLM(bv.BERTConfig.tiny(vocab_size=len(tokenizer))).eval()\n"
    "causal = CausalPanel(model, tokenizer, clean='The capital of France is [MASK].',\n"
    "                     corrupted='The capital of Italy is [MASK].')\n"
    "causal",
]
OUTPUT = ".jp-OutputArea-output:has(.bvl-cell-grid-view):visible"
GRID = "div.bvl-cell-grid-view"

# What every cell grid of the output shows (their data- attributes), and the hover box's text where it is shown.
GRIDS = """(output) => [...output.querySelectorAll('div.bvl-cell-grid-view')].map((el) => {
  const tip = el.querySelector('.bvl-tooltip');
  return {title: el.dataset.title || '', cells: Number(el.dataset.cells || 0), selected: el.dataset.selected || '',
          message: el.dataset.message || '', cell: el.dataset.cell || '', tip: el.dataset.tip || '',
          shown: tip && getComputedStyle(tip).display === 'block' ? tip.textContent : '',
          scripts: el.querySelectorAll('script').length};
})"""


def in_kernel(page: Any, code: str) -> Any:
    """What the kernel answers to `code`, which prints one JSON line."""
    return json.loads(kernel_prints(page, code).strip().splitlines()[-1])


def grids_show(page: Any, output: Any, condition: str) -> list[dict]:
    """The output's cell grids once `condition` (a JS expression over `g`, the list GRIDS returns) holds."""
    page.wait_for_function(f"(output) => {{ const g = ({GRIDS})(output); return g.length > 0 && ({condition}); }}",
                           arg=output.element_handle(), timeout=TIMEOUT_MS, polling=200)
    return output.evaluate(GRIDS)


def choose_tool(page: Any, output: Any, label: str, title_start: str) -> list[dict]:
    """Click the Causal tab's switcher button `label` and wait until its first figure's title starts so."""
    output.locator(".widget-toggle-button", has_text=re.compile(f"^{re.escape(label)}$")).first.click()
    return grids_show(page, output, f"g[0].title.startsWith({json.dumps(title_start)}) && g[0].cells > 0")


def hover_cell(page: Any, output: Any, row: int, col: int, grid: int = 0) -> dict:
    """Move the pointer over a cell of the grid-th figure and return that grid's state once its tooltip shows."""
    output.locator(GRID).nth(grid).locator(f'.bvl-cell[data-row="{row}"][data-col="{col}"]').hover()
    return grids_show(page, output, f"g[{grid}].shown !== '' && g[{grid}].cell === '{row},{col}'")[grid]


def serious_violations(page: Any, output: Any) -> list[dict]:
    return page.evaluate(RUN_AXE, [output.element_handle(), list(SERIOUS)])


def test_the_causal_tab_renders_reads_exact_values_opens_exports_and_passes_axe(page, lab_server, lab_context):
    page.set_default_timeout(TIMEOUT_MS)
    page.set_viewport_size({"width": 1400, "height": 1100})
    page.on("console", lambda message: page.errors.append(f"console.error: {message.text}"[:600])
            if message.type == "error" else None)
    path = open_and_run(page, lab_server, "causal_tab.ipynb", CELLS, timeout_ms=TIMEOUT_MS).path
    assert not page.evaluate(DOM_ERRORS)
    output = page.locator(OUTPUT).first
    layers, tokens = in_kernel(page, "import json; print(json.dumps(list(causal.patching.result.effect.shape)))")

    # patching: the layer × token map, one cell per layer and token
    patching = grids_show(page, output, "g[0].title.startsWith('activation patching') && g[0].cells > 0")
    assert patching[0]["cells"] == layers * tokens and patching[0]["scripts"] == 0, patching

    # hover shows the cell's exact value as the kernel holds it
    expected = in_kernel(page, "from bertviz_lab.widgets.figures.patching import exact; "
                               "print(json.dumps(exact(causal.patching.result.normalized[1, 4])))")
    hovered = hover_cell(page, output, 1, 4)
    assert hovered["shown"] == hovered["tip"] and f"restores {expected}" in hovered["tip"], hovered

    SCREENSHOTS.mkdir(exist_ok=True)
    tab_picture = SCREENSHOTS / "causal_tab.png"  # the README's: the tab on its patching map
    page.mouse.move(1, 1)
    page.screenshot(path=str(tab_picture), clip=output.evaluate(CONTENT_BOX))

    # the keyboard: the arrows move between cells, Enter opens one: its layer in the attention panel below
    output.locator(GRID).first.locator('.bvl-cell[data-row="1"][data-col="4"]').focus()
    page.keyboard.press("ArrowRight")
    moved = grids_show(page, output, "g[0].cell === '1,5'")[0]
    assert moved["shown"] == moved["tip"] and moved["tip"].startswith("layer 1 · 5·"), moved
    page.keyboard.press("ArrowUp")
    grids_show(page, output, "g[0].cell === '0,5'")
    page.keyboard.press("Enter")
    opened = live_heatmap_shows(page, "layer 0 ·", timeout_ms=TIMEOUT_MS)
    assert in_kernel(page, "print(json.dumps([causal.attention.layer.value, causal.attention.aggregation.value]))") \
        == [0, "mean"], opened
    grids_show(page, output, "g[0].selected === '0,5'")

    # the export button writes the figure on screen as an SVG next to the notebook
    figures = lab_server.root / "notebooks" / "bertviz_figures"
    existing = set(figures.glob("patching-*.svg")) if figures.exists() else set()
    output.locator("button", has_text="export").first.click()  # the patching panel's, above the attention panel's
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not set(figures.glob("patching-*.svg")) - existing:
        time.sleep(0.3)
    written = sorted(set(figures.glob("patching-*.svg")) - existing)
    assert written, "the export button wrote no SVG"
    svg = written[0].read_text(encoding="utf-8")
    assert svg.startswith("<svg") and "activation patching" in svg and svg.count('class="bvl-cell') >= layers * tokens
    assert "<script" not in svg

    # the logit lens: one row per layer and the embeddings, five ranks across; hover reads the exact probability
    lens = choose_tool(page, output, "Logit lens", "logit lens")
    assert lens[0]["cells"] == (layers + 1) * 5, lens
    probability = in_kernel(page, "from bertviz_lab.widgets.figures.cell_grid import exact; p = causal.logit_lens; "
                                  "print(json.dumps(exact(p.lens.top(p.position.value, 5)[1].probs[0])))")
    hovered = hover_cell(page, output, 1, 0)
    assert hovered["tip"].startswith("layer 1 · rank 1 · ") and f"p = {probability} " in hovered["tip"], hovered

    # FFN neurons: the most active neurons at the token and one neuron over the text
    neurons = choose_tool(page, output, "FFN neurons", "layer 0 · the most active neurons")
    drawn = [g for g in neurons if g["cells"]]  # (the corpus's list stays empty: no corpus here)
    assert len(drawn) == 2 and drawn[1]["title"].endswith("over the text") and drawn[1]["cells"] == tokens, neurons

    # axe-core on every tool, light and dark; a picture of each
    page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    found: dict[str, list[dict]] = {}
    pictures = []
    tools = {"Patching": "activation patching", "Logit lens": "logit lens", "FFN neurons": "layer 0 ·"}
    try:
        for theme in ("light", "dark"):
            set_theme(page, theme)
            for label, title in tools.items():
                choose_tool(page, output, label, title)
                violations = serious_violations(page, output)
                if violations:
                    found[f"{theme} · {label}"] = violations
                slot = output.locator(".bvl-panel .bvl-panel").first  # the tool's panel (and the attention below)
                picture = SCREENSHOTS / f"causal_{label.lower().replace(' ', '_')}_{theme}.png"
                page.screenshot(path=str(picture), clip=slot.evaluate(CONTENT_BOX))
                pictures.append(picture)
    finally:
        set_theme(page, "light")
    assert not found, f"axe-core found serious or critical violations: {found}"
    copy_to_readme([tab_picture])

    # after a reload (the kernel lives on) the tool redraws from the synced state, and a change made in the
    # reloaded page reaches the kernel and comes back drawn
    shown = choose_tool(page, output, "Logit lens", "logit lens")[0]
    save_notebook(page)
    page.reload(wait_until="domcontentloaded")
    page.wait_for_function(KERNEL_READY, arg=path, timeout=TIMEOUT_MS, polling=250)
    output = page.locator(OUTPUT).first
    again = grids_show(page, output, "g[0].cells > 0")[0]
    assert (again["title"], again["cells"]) == (shown["title"], shown["cells"]), (again, shown)
    choose_tool(page, output, "Patching", "activation patching")
    output.locator(".widget-toggle-button", has_text=re.compile("^attention heads$")).first.click()
    heads = grids_show(page, output, "g[0].title.includes('each head')")[0]
    assert heads["cells"] == layers * in_kernel(page, "print(json.dumps(model.config.num_attention_heads))"), heads
    assert in_kernel(page, "print(json.dumps(causal.patching.point))") == "head_out"

    # a second tab on the same notebook shows the same tool, and a tool chosen there shows in the first tab too
    second = lab_context.new_page()
    try:
        open_notebook(second, lab_server, path)
        other = second.locator(OUTPUT).first
        assert grids_show(second, other, "g[0].title.includes('each head')")[0]["cells"] == heads["cells"]
        choose_tool(second, other, "Logit lens", "logit lens")
        grids_show(page, output, "g[0].title.startsWith('logit lens')")
    finally:
        second.close()

    # the kernel gone: hover still shows the exact values the page holds
    choose_tool(page, output, "Logit lens", "logit lens")
    page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    page.wait_for_function("() => !!document.querySelector('.bvl-kernel-notice')", timeout=TIMEOUT_MS, polling=250)
    page.mouse.move(1, 1)
    hovered = hover_cell(page, output, 1, 0)
    assert hovered["tip"].startswith("layer 1 · rank 1 · ") and f"p = {probability} " in hovered["tip"], hovered
    assert not page.errors, page.errors
