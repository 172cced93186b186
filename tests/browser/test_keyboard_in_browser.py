"""The attention panel with the keyboard alone, in JupyterLab in headless Chromium, offline: once the panel's first
control has focus, only key presses reach the page. Tab walks to the model view's thumbnails (one tab stop), the arrow
keys move between heads, Space switches a head off and on again and Escape switches every head on (the kernel's
ablation state changes and changes back), Enter opens a head as the heatmap and the focus follows into its cells; no
key pressed in a panel (a, b, m, d, the arrows, Enter) reaches the notebook behind it; in the neuron view the arrow
keys move along the keys and their dimensions (the hover box shows the kernel's numbers) and Enter makes a key the
query (the kernel names the new token); in the loss curves the arrows move a step cursor whose box reads the values.
Each step waits for the state it expects, in the kernel or on the page.

Screenshots of the focused views (light and dark) go to screenshots/keyboard_*.png; with
BERTVIZ_LAB_SCREENSHOTS=docs/images the README's three (light) pictures are written there too (tools/screenshots.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from browser_lab import (
    CONTENT_BOX,
    SCREENSHOTS,
    LabServer,
    copy_to_readme,
    kernel_prints,
    open_and_run,
    recording_context,
    set_theme,
)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

TIMEOUT_MS = 180_000
WAIT_S = 60
MAX_TABS = 80  # Tab presses allowed to reach a view from the panel's first control
README_PICTURES = ("keyboard_model_view", "keyboard_neuron_view", "keyboard_loss_curves")  # the dark ones: to look at
CELLS = [
    "from bertviz_lab.widgets import AttentionPanel\n"
    "from bertviz_lab.widgets.panels.models import default_model_and_tokenizer\n"
    "model, tokenizer = default_model_and_tokenizer()",
    "heads = AttentionPanel(model=model, tokenizer=tokenizer, text='The cat sat on the [MASK] because it was warm.',\n"
    "                       layer=0, head=0, view='model view')\n"
    "heads",
    "keys = AttentionPanel(model=model, tokenizer=tokenizer, text='The cat sat on the mat because it was warm.',\n"
    "                      layer=2, head=4, view='neuron view', query=6)\n"
    "keys",
    "from bertviz_lab.widgets import LossCurves\n"
    "curves = LossCurves(min_interval=0)\n"
    "for step in range(1, 41):\n"
    "    curves({'step': step, 'train_mlm_loss': 8 / step ** 0.5, 'train_nsp_loss': 0.7 / step ** 0.3,\n"
    "            'eval_mlm_accuracy': step / 50 if step % 10 == 0 else None,\n"
    "            'eval_nsp_accuracy': step / 60 if step % 10 == 0 else None, 'lr': 1e-4})\n"
    "curves.flush()\n"
    "curves",
]

# The kernel's state of both panels, as JSON: what the keys changed.
STATE = """import json
print(json.dumps({'view': heads.view.value, 'layer': heads.layer.value, 'head': heads.head.value,
                  'ablated': [list(h) for h in heads.ablation_bar.heads],
                  'ablation': None if heads.ablation_bar.ablation is None else
                              [list(h) for h in heads.ablation_bar.ablation.heads],
                  'query': keys.query.value, 'query_token': keys.neuron_view.query_token,
                  'title': keys.neuron_view.title}))"""

# Where the keyboard is: the focused element's kind and data, and the hover box of its view.
FOCUS = """() => {
  const el = document.activeElement;
  const thumb = el && el.closest && el.closest('g.bvl-thumb');
  const rows = el && el.closest && el.closest('g.bvl-key-rows');
  const curves = el && el.classList && el.classList.contains('bvl-loss-curves');
  const view = el && el.closest && el.closest('.bvl-view');
  const tip = view && (view.querySelector(':scope > .bvl-tooltip') || view.parentElement.querySelector(
    ':scope > .bvl-tooltip') || view.querySelector('.bvl-heatmap-stage > .bvl-tooltip'));
  const cells = el && el.closest && el.closest('.bvl-heatmap-view') && el.classList.contains('bvl-cells');
  return {thumb: thumb ? thumb.dataset.layer + ':' + thumb.dataset.head : null, rows: !!rows, curves: !!curves,
          cells: !!cells,
          label: el && el.getAttribute ? el.getAttribute('aria-label') || '' : '',
          pressed: el && el.getAttribute ? el.getAttribute('aria-pressed') : null,
          ring: el && el.matches && el.matches(':focus-visible'),
          tip: tip && getComputedStyle(tip).display !== 'none' ? tip.textContent : '',
          cursor: view ? view.dataset.cursor || '' : ''};
}"""


# The notebook behind the panels: its cells, the active one and its kind, and the mode (command or edit).
NOTEBOOK = """() => {
  const notebook = window.jupyterapp.shell.currentWidget.content;
  return {cells: notebook.widgets.length, active: notebook.activeCellIndex, type: notebook.activeCell.model.type,
          mode: notebook.mode};
}"""


def notebook_keys_stay_out(page: Any, control: Any) -> dict:
    """Focus a panel's `control` and press the notebook's command-mode keys there: the notebook (its cells, the
    active one and the mode) must not change. Its state, for later checks."""
    control.focus()
    notebook = page.evaluate(NOTEBOOK)
    for key in ("a", "b", "m", "d", "ArrowDown", "ArrowUp"):
        page.keyboard.press(key)
    assert page.evaluate(NOTEBOOK) == notebook, (notebook, page.evaluate(NOTEBOOK))
    return notebook


def wait_until(page: Any, what: str, read: Callable[[], Any], check: Callable[[Any], bool]) -> Any:
    """Poll `read()` until `check` accepts it (the state expected, never a time); fail naming what was last seen."""
    import time

    deadline, seen = time.monotonic() + WAIT_S, None
    while time.monotonic() < deadline:
        seen = read()
        if check(seen):
            return seen
        page.wait_for_timeout(200)
    raise AssertionError(f"{what}; last seen: {seen}")


def kernel_state(page: Any) -> dict:
    return json.loads(kernel_prints(page, STATE))


def focus(page: Any) -> dict:
    return page.evaluate(FOCUS)


def tab_to(page: Any, what: str, reached: Callable[[dict], bool]) -> dict:
    """Press Tab until the focused element is the one wanted; fail after MAX_TABS presses."""
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        seen = focus(page)
        if reached(seen):
            return seen
    raise AssertionError(f"{MAX_TABS} presses of Tab did not reach {what}; focus is on {focus(page)}")


def picture(page: Any, output: Any, name: str, pictures: list[Path]) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    target = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(target), clip=output.evaluate(CONTENT_BOX))
    pictures.append(target)


def test_heads_and_query_tokens_with_the_keyboard_alone(page, lab_server):
    page.set_default_timeout(TIMEOUT_MS)
    page.set_viewport_size({"width": 1500, "height": 1100})
    pictures: list[Path] = []
    try:
        open_and_run(page, lab_server, "keyboard_check.ipynb", CELLS, timeout_ms=TIMEOUT_MS)
        page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
        outputs = page.locator(".jp-OutputArea-output:visible").filter(has=page.locator(".bvl-panel"))
        heads_output, keys_output, curves_output = outputs.nth(0), outputs.nth(1), outputs.nth(2)
        heads_output.locator("svg.bvl-model-view g.bvl-thumb").first.wait_for()
        keys_output.locator("svg.bvl-neuron g.bvl-key-rows").first.wait_for()
        start = kernel_state(page)
        assert start["ablated"] == [] and start["view"] == "model view" and start["query"] == 6, start

        # the model view: the output's first control gets focus; from here on only keys. JupyterLab's own
        # command-mode keys pressed there act on the panel's control or nowhere, never on the notebook
        notebook = notebook_keys_stay_out(page, heads_output.locator(".widget-toggle-button").first)
        seen = tab_to(page, "a thumbnail of the model view", lambda f: f["thumb"] is not None)
        assert seen["thumb"] == "0:0" and seen["ring"], seen  # the one tab stop is the selected head
        assert seen["label"] == "layer 0, head 0, on" and seen["pressed"] == "false", seen
        assert "Enter open" in seen["tip"], seen["tip"]
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowDown")
        seen = wait_until(page, "the arrows did not move to layer 1, head 1", lambda: focus(page),
                          lambda f: f["thumb"] == "1:1")
        assert seen["cursor"] == "1:1" and seen["ring"], seen

        page.keyboard.press("Space")
        state = wait_until(page, "Space did not switch head 1:1 off in the kernel", lambda: kernel_state(page),
                           lambda s: s["ablation"] == [[1, 1]])
        assert state["ablated"] == [[1, 1]] and state["view"] == "model view", state
        seen = wait_until(page, "the redrawn thumbnail did not keep the focus and say it is off",
                          lambda: focus(page), lambda f: f["pressed"] == "true")
        assert seen["thumb"] == "1:1" and seen["label"] == "layer 1, head 1, switched off", seen
        picture(page, heads_output, "keyboard_model_view", pictures)
        page.keyboard.press("Space")
        state = wait_until(page, "Space again did not switch head 1:1 on in the kernel", lambda: kernel_state(page),
                           lambda s: s["ablated"] == [] and s["ablation"] is None)
        wait_until(page, "the thumbnail did not say it is on again", lambda: focus(page),
                   lambda f: f["thumb"] == "1:1" and f["pressed"] == "false")

        page.keyboard.press("Shift+Enter")
        page.keyboard.press("ArrowRight")
        wait_until(page, "the focus did not move on after Shift+Enter", lambda: focus(page),
                   lambda f: f["thumb"] == "1:2")
        page.keyboard.press("Space")
        wait_until(page, "two heads are not off", lambda: kernel_state(page),
                   lambda s: s["ablation"] == [[1, 1], [1, 2]])
        page.keyboard.press("Escape")
        state = wait_until(page, "Escape did not switch every head on", lambda: kernel_state(page),
                           lambda s: s["ablated"] == [] and s["ablation"] is None)

        page.keyboard.press("End")
        page.keyboard.press("PageDown")
        seen = wait_until(page, "End and PageDown did not reach the last layer's last head", lambda: focus(page),
                          lambda f: f["thumb"] == "5:11")
        page.keyboard.press("Enter")
        state = wait_until(page, "Enter did not open head 5:11 as the heatmap", lambda: kernel_state(page),
                           lambda s: s["view"] == "heatmap")
        assert (state["layer"], state["head"]) == (5, 11) and state["ablated"] == [], state
        heads_output.locator("div.bvl-heatmap-view svg.bvl-heatmap").first.wait_for(state="visible")
        seen = wait_until(page, "Enter on the thumbnail did not leave the focus in the heatmap's cells",
                          lambda: focus(page), lambda f: f["cells"])
        page.keyboard.press("ArrowRight")
        wait_until(page, "the arrows did not read the heatmap's cells", lambda: focus(page),
                   lambda f: f["cells"] and f["tip"] != "")
        assert page.evaluate(NOTEBOOK) == notebook  # Enter, the arrows and Space never reached the notebook

        # the neuron view: keys and dimensions with the arrows, Enter makes a key the query
        keys_output.locator(".widget-toggle-button").first.focus()
        seen = tab_to(page, "the neuron view's key rows", lambda f: f["rows"])
        assert seen["tip"].startswith("key 6·mat\n") and seen["ring"], seen  # the cursor starts on the query's row
        page.keyboard.press("ArrowDown")
        seen = wait_until(page, "ArrowDown did not move to key 7", lambda: focus(page),
                          lambda f: f["tip"].startswith("key 7·because\n"))
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        seen = wait_until(page, "ArrowRight did not show dimension 1 of key 7", lambda: focus(page),
                          lambda f: f["tip"].startswith("key 7·because\ndimension 1\n"))
        numbers = kernel_prints(page, "r, row = keys.neuron_view.rows(), keys.neuron_view.key_positions.index(7)\n"
                                      "print(repr(float(r.q[1])), repr(float(r.k[row, 1])), "
                                      "repr(float(r.products[row, 1])))").split()
        tip = dict(line.split(" = ") for line in seen["tip"].splitlines()[2:])
        for name, exact in zip(("q", "k", "q ⊙ k"), numbers):
            assert float(tip[name]) == pytest.approx(float(exact), rel=1e-5), (name, tip, numbers)
        assert seen["label"].startswith("key 7·because, dimension 1, q = "), seen
        picture(page, keys_output, "keyboard_neuron_view", pictures)
        page.keyboard.press("Enter")
        state = wait_until(page, "Enter did not make key 7 the query in the kernel", lambda: kernel_state(page),
                           lambda s: s["query"] == 7)
        assert state["query_token"] == "because" and state["title"].endswith("query 7·because"), state
        seen = wait_until(page, "the redrawn rows did not keep the focus on the new query's row", lambda: focus(page),
                          lambda f: f["rows"] and f["tip"].startswith("key 7·because\nq·k"))
        page.keyboard.press("ArrowUp")
        page.keyboard.press("Escape")  # back to the query's row
        wait_until(page, "Escape did not take the cursor back to the query", lambda: focus(page),
                   lambda f: f["tip"].startswith("key 7·because\nq·k"))

        # the loss curves: a step cursor along a chart, the next chart with the down arrow
        curves_output.locator("div.bvl-loss-curves svg.bvl-fig").first.wait_for()
        curves_output.locator("button").first.focus()
        tab_to(page, "the loss curves", lambda f: f["curves"])
        page.keyboard.press("ArrowLeft")  # the first key: the last step
        seen = wait_until(page, "ArrowLeft did not show the last step's values", lambda: focus(page),
                          lambda f: f["tip"].startswith("step 40\n"))
        mlm = dict(line.split(": ") for line in seen["tip"].splitlines()[1:])
        assert float(mlm["train MLM"]) == pytest.approx(8 / 40 ** 0.5, rel=5e-3), seen["tip"]
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowDown")
        seen = wait_until(page, "ArrowLeft and ArrowDown did not show step 39 of the NSP chart", lambda: focus(page),
                          lambda f: f["tip"].startswith("step 39\ntrain NSP: "))
        assert seen["cursor"] == "1:39" and seen["ring"], seen
        picture(page, curves_output, "keyboard_loss_curves", pictures)

        # the same focus in the dark theme, for a look at the ring and the cursor on a dark ground
        set_theme(page, "dark")
        keys_output.locator(".widget-toggle-button").first.focus()
        tab_to(page, "the neuron view's key rows again", lambda f: f["rows"])
        page.keyboard.press("ArrowRight")
        wait_until(page, "the cursor did not move in the dark theme", lambda: focus(page),
                   lambda f: f["tip"].startswith("key 7·because\ndimension 0\n"))
        picture(page, keys_output, "keyboard_neuron_view_dark", pictures)
        kernel_prints(page, "heads.view.value = 'model view'")  # for the picture only: its keys were checked above
        heads_output.locator(".widget-toggle-button").first.focus()
        seen = tab_to(page, "the model view's thumbnails again", lambda f: f["thumb"] is not None)
        assert seen["thumb"] == "5:11", seen  # the tab stop stayed where the arrows left it
        picture(page, heads_output, "keyboard_model_view_dark", pictures)
        curves_output.locator("button").first.focus()
        tab_to(page, "the loss curves again", lambda f: f["curves"])
        page.keyboard.press("ArrowLeft")
        wait_until(page, "ArrowLeft did not show the last step in the dark theme", lambda: focus(page),
                   lambda f: f["tip"].startswith("step 40\n"))
        picture(page, curves_output, "keyboard_loss_curves_dark", pictures)
        copy_to_readme([path for path in pictures if path.stem in README_PICTURES])
    finally:
        set_theme(page, "light")  # the theme is a user setting of the shared server: leave it as found


def test_keys_in_a_panel_stay_out_of_notebook_7_and_enter_leaves_the_focus_in_the_heatmap(chromium, tmp_path):
    """The same keys in Notebook 7, whose notebook takes the same command-mode shortcuts: a, b, m, d and the arrows
    pressed on the panel's controls change no cell, and Enter on a thumbnail moves the focus into the heatmap. On a
    server and in a browser context of their own: run on the shared server, this test made a later JupyterLab
    page's font request fail (403), which the notebook tests count as an error (not understood yet)."""
    server = LabServer(tmp_path / "jupyter")
    server.start()
    try:
        with recording_context(chromium, server) as context:
            page = context.new_page()
            keys_in_notebook_7(page, server)
            page.close()
    finally:
        server.stop()


def keys_in_notebook_7(page: Any, lab_server: Any) -> None:
    page.set_default_timeout(TIMEOUT_MS)
    page.set_viewport_size({"width": 1400, "height": 1000})
    open_and_run(page, lab_server, "keyboard_notebook7.ipynb", CELLS[:2], app="notebook7", timeout_ms=TIMEOUT_MS)
    output = page.locator(".jp-OutputArea-output:visible").filter(has=page.locator(".bvl-panel")).first
    output.locator("svg.bvl-model-view g.bvl-thumb").first.wait_for()
    notebook = notebook_keys_stay_out(page, output.locator(".widget-toggle-button").first)
    seen = tab_to(page, "a thumbnail of the model view", lambda f: f["thumb"] is not None)
    assert seen["thumb"] == "0:0", seen
    page.keyboard.press("Enter")  # on the head already selected: it opens all the same
    wait_until(page, "Enter did not open head 0:0 as the heatmap", lambda: kernel_state_of_heads(page),
               lambda s: s["view"] == "heatmap")
    wait_until(page, "the focus did not follow into the heatmap's cells", lambda: focus(page), lambda f: f["cells"])
    assert page.evaluate(NOTEBOOK) == notebook


def kernel_state_of_heads(page: Any) -> dict:
    return json.loads(kernel_prints(page, "import json\nprint(json.dumps({'view': heads.view.value}))"))
