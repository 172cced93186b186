"""Inside attention in a real browser: the neuron view shows its drawing (q, K and q ⊙ K, scores and weights, colour
bars; also in the dark theme), hover and the keyboard read its rows, a query token clicked in the head view opens
the neuron view on it, a key clicked (or chosen with the keyboard) there becomes the query, and
heads clicked off in the model view run the text again and show what changed (thumbnails, badges, predictions), with
reset and shift-click. JupyterLab in headless Chromium, offline, on a notebook the test writes next to the others.
Screenshots go to screenshots/; with BERTVIZ_LAB_SCREENSHOTS=docs/images the README's neuron_view.png,
head_view.png and head_ablation.png are written there too (tools/screenshots.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from browser_lab import (
    CONTENT_BOX,
    REPO,
    SCREENSHOTS,
    Run,
    allowed_url,
    assert_no_error_outputs,
    copy_to_readme,
    open_and_run,
    set_theme,
    wait_for,
)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

NAME = "inside_attention_check.ipynb"
CELLS = [
    """import warnings

import torch

from bertviz_lab.model import BERT_Weights, BERTForPreTraining, BERTTokenizerFast
from bertviz_lab.widgets import AttentionPanel

torch.manual_seed(0)
tokenizer = BERTTokenizerFast.from_pretrained(BERT_Weights.DEFAULT.path)
with warnings.catch_warnings():  # MiniLM has no MLM/NSP heads: they are initialised (and reported)
    warnings.simplefilter("ignore")
    model = BERTForPreTraining.from_pretrained(BERT_Weights.DEFAULT.path).eval()""",
    """neuron = AttentionPanel(model=model, tokenizer=tokenizer,
                        text="The trophy didn't fit in the suitcase because it was too big.",
                        layer=3, head=7, view="neuron view", query=11)
neuron""",
    """panel = AttentionPanel(model=model, tokenizer=tokenizer,
                       text="The trophy didn't fit in the [MASK] because it was too big.",
                       text_b="So we left it at home.", layer=2, head=5, view="head view")
panel""",
    """long_text = "The trophy didn't fit in the suitcase because it was too big. " * 40
long_neuron = AttentionPanel(model=model, tokenizer=tokenizer, text=long_text, layer=3, head=7, view="neuron view",
                             query=20)
long_neuron""",
]

# What a neuron view shows: its drawing's data- attributes (figures/neuron.py), whether each vector block is an
# embedded image on screen, the bars, the colour bars' titles, the key labels, and the hover box's text.
NEURON_DRAWN = """(el) => {
  const svg = el.querySelector('svg.bvl-neuron');
  const shown = el.getBoundingClientRect();
  if (!svg) return {rows: 0, query: -1, title: '', blocks: {}, bars: 0, colorbars: [], keys: [], visible: false,
                    tip: ''};
  const blocks = {};
  for (const image of svg.querySelectorAll('image.bvl-block')) {
    blocks[image.dataset.block] = image.getBoundingClientRect().width > 0
      && image.getAttribute('href').startsWith('data:image/png;base64,');
  }
  const texts = (cls) => [...svg.querySelectorAll('text.' + cls)].map((t) => t.firstChild.nodeValue);
  const tip = el.querySelector('.bvl-tooltip');
  const counted = (where) => Number(
    svg.querySelector(`text.bvl-off-window[data-where="${where}"]`)?.dataset.count || 0);
  return {rows: Number(svg.dataset.rows), query: Number(svg.dataset.query), title: svg.dataset.title || '', blocks,
          first: Number(svg.dataset.first), keys_all: Number(svg.dataset.keys), above: counted('above'),
          below: counted('below'),
          bars: svg.querySelectorAll('g.bvl-score-bars rect, g.bvl-weight-bars rect').length,
          colorbars: texts('bvl-colorbar-title'), keys: texts('bvl-key'), weights: texts('bvl-weight'),
          visible: shown.width > 0 && shown.height > 0,
          tip: tip && getComputedStyle(tip).display !== 'none' ? tip.textContent : ''};
}"""

BOX_WIDTH = "(el) => el.getBoundingClientRect().width"

# Whether the neuron view fits its output area: no horizontal scrolling, the drawing's right edge inside the area.
FITS = """(el) => {
  const area = el.closest('.jp-OutputArea-output').getBoundingClientRect();
  return {scrollWidth: el.scrollWidth, clientWidth: el.clientWidth, areaRight: area.right,
          svgRight: el.querySelector('svg.bvl-neuron').getBoundingClientRect().right};
}"""

# The model view's state as drawn (its figure's documented data- attributes, figures/model_view.py): heads off,
# badges, click mode, prediction lines, title, and a fingerprint of the thumbnails' images.
MODEL_VIEW_DRAWN = """(el) => {
  const figure = el.querySelector('svg.bvl-model-view');
  if (!figure) return {ablated: null, badges: 0, mode: el.dataset.clickMode || '', offMarks: 0, lines: [], title: '',
                       pixels: 0, thumbs: 0};
  let sum = 0;
  for (const image of figure.querySelectorAll('g.bvl-thumb image')) {
    const href = image.getAttribute('href');
    for (let i = 0; i < href.length; i += 7) sum = (sum * 31 + href.charCodeAt(i)) % 1000000007;
  }
  return {ablated: figure.dataset.ablated, badges: Number(figure.dataset.badges), mode: el.dataset.clickMode || '',
          offMarks: figure.querySelectorAll('g.bvl-thumb[data-off="true"] .bvl-ablated').length,
          lines: [...figure.querySelectorAll('text.bvl-ablation-line')].map((l) => l.textContent),
          title: figure.querySelector('text.bvl-title').textContent, pixels: sum,
          thumbs: figure.querySelectorAll('g.bvl-thumb image').length};
}"""

# The head view as drawn: the heads shown (the figure's data-heads), lines shown and hidden while a token is hovered.
HEAD_VIEW_DRAWN = """(el) => {
  const figure = el.querySelector('svg.bvl-head-view');
  if (!figure) return {heads: null, lines: 0, hovering: false, lit: 0, hidden: 0};
  const lines = [...figure.querySelectorAll('g.bvl-head-lines line')];
  return {heads: figure.dataset.heads, lines: lines.length, hovering: figure.classList.contains('bvl-hovering'),
          lit: lines.filter((l) => getComputedStyle(l).visibility !== 'hidden').length,
          hidden: lines.filter((l) => getComputedStyle(l).visibility === 'hidden').length};
}"""


def button(panel: Any, text: str) -> Any:
    return panel.locator(".widget-toggle-button", has_text=re.compile(f"^{re.escape(text)}$")).first


def active(panel: Any, text: str) -> bool:
    return "mod-active" in (button(panel, text).get_attribute("class") or "")


def picture(run: Run, locator: Any, name: str, pictures: list[Path]) -> None:
    """A screenshot of the output's content into screenshots/ (copied to the README's folder if the test passes)."""
    SCREENSHOTS.mkdir(exist_ok=True)
    locator.scroll_into_view_if_needed()
    run.page.wait_for_timeout(300)
    target = SCREENSHOTS / f"{name}.png"
    run.page.screenshot(path=str(target), clip=locator.evaluate(CONTENT_BOX))
    pictures.append(target)


def test_neuron_view_and_head_ablation_in_jupyterlab(page, lab_server, lab_context):
    first_request = len(lab_context.requested)
    page.set_viewport_size({"width": 1600, "height": 1100})
    run = Run(page, NAME)
    pictures: list[Path] = []
    try:
        notebook = open_and_run(page, lab_server, NAME, CELLS)
        page.evaluate("() => window.jupyterapp.shell.collapseLeft()")  # the figures get the page's width
        panels = run.outputs(".widget-toggle-button:text-is('neuron view')")
        wait_for(run, "three attention panels", lambda: panels.count() == 3)
        first, second, third = panels.nth(0), panels.nth(1), panels.nth(2)

        with run.step("the neuron view draws q, K, q ⊙ K, scores, weights and two titled colour bars"):
            neuron = first.locator("div.bvl-neuron-view").first
            drawn = wait_for(run, "the neuron view has no data", lambda: (d := neuron.evaluate(NEURON_DRAWN))["rows"]
                             > 1 and d)
            assert drawn["visible"] and drawn["query"] == 11, drawn
            assert drawn["title"] == "layer 3 · head 7 · query 11·it", drawn["title"]
            assert drawn["blocks"] == {"q": True, "k": True, "products": True}, drawn["blocks"]
            assert drawn["bars"] == 2 * drawn["rows"], drawn  # a score bar and a weight bar per key
            assert drawn["colorbars"] == ["q, k: value per dimension", "q ⊙ k: product per dimension"], drawn
            assert "suitcase" in drawn["keys"] and "it" in drawn["keys"]
            picture(run, first, "neuron_view", pictures)

        with run.step("hover over a key row shows its exact score and weight from the view's buffers"):
            neuron.locator("svg g.bvl-weight-bars rect").nth(9).hover()
            hovered = wait_for(run, "no hover box over key 9",
                               lambda: (d := neuron.evaluate(NEURON_DRAWN))["tip"].startswith("key 9·suitcase") and d)
            lines = hovered["tip"].splitlines()
            assert lines[1].startswith("q·k/√d = ") and lines[2].startswith("softmax = "), lines
            assert f"{float(lines[2].split(' = ')[1]):.3f}" == hovered["weights"][9], (lines, hovered["weights"])
            page.mouse.move(5, 5)

        with run.step("keyboard: the key rows are one tab stop, arrows move, Enter makes the key the query"):
            neuron.locator("svg g.bvl-key-rows").focus()
            wait_for(run, "focus did not show the query's row",
                     lambda: neuron.evaluate(NEURON_DRAWN)["tip"].startswith("key 11·it"))
            page.keyboard.press("ArrowUp")
            wait_for(run, "ArrowUp did not move to key 10",
                     lambda: neuron.evaluate(NEURON_DRAWN)["tip"].startswith("key 10·because"))
            page.keyboard.press("Enter")
            chosen = wait_for(run, "Enter did not make key 10 the query",
                              lambda: (d := neuron.evaluate(NEURON_DRAWN))["query"] == 10 and d)
            assert chosen["title"] == "layer 3 · head 7 · query 10·because", chosen["title"]
            page.mouse.click(5, 5)

        with run.step("the neuron view in JupyterLab Dark"):
            set_theme(page, "dark")
            ground = "(el) => getComputedStyle(el.querySelector('svg.bvl-neuron .bvl-ground')).fill"
            wait_for(run, "the figure's ground did not follow the theme",
                     lambda: neuron.evaluate(ground) != "rgb(255, 255, 255)")
            SCREENSHOTS.mkdir(exist_ok=True)
            first.scroll_into_view_if_needed()
            page.screenshot(path=str(SCREENSHOTS / "neuron_view_dark.png"), clip=first.evaluate(CONTENT_BOX))
            set_theme(page, "light")

        with run.step("a key's token clicked in the neuron view becomes the query"):
            neuron.locator("svg text.bvl-key[data-position='9']").click()
            moved = wait_for(run, "the query did not move to 'suitcase'",
                             lambda: (d := neuron.evaluate(NEURON_DRAWN))["query"] == 9 and d)
            assert moved["title"] == "layer 3 · head 7 · query 9·suitcase", moved["title"]

        long_view = third.locator("div.bvl-neuron-view").first
        with run.step("at 512 tokens the neuron view draws a window of keys that fits an 800-px output area"):
            drawn = wait_for(run, "the long text's neuron view has no data",
                             lambda: (d := long_view.evaluate(NEURON_DRAWN))["rows"] > 1 and d)
            assert (drawn["rows"], drawn["keys_all"], drawn["first"]) == (48, 512, 0), drawn
            assert len(drawn["keys"]) == 48 and drawn["below"] == 512 - 48, drawn  # every key of the window labelled
            width = page.viewport_size["width"]
            output = third  # the output area the panel is drawn in
            page.set_viewport_size({"width": width - round(output.evaluate(BOX_WIDTH)) + 800, "height": 1100})
            wait_for(run, "the output area did not become 800 px wide",
                     lambda: round(output.evaluate(BOX_WIDTH)) == 800)
            fits = long_view.evaluate(FITS)
            assert fits["scrollWidth"] <= fits["clientWidth"] <= 800 and fits["svgRight"] <= fits["areaRight"], fits
            picture(run, third, "neuron_view_long", pictures)
        with run.step("the keyboard and the wheel move the window; the cursor stays on its key"):
            long_view.locator("svg g.bvl-key-rows").focus()
            wait_for(run, "focus did not show the query's row",
                     lambda: long_view.evaluate(NEURON_DRAWN)["tip"].startswith("key 20·"))
            page.keyboard.press("End")
            moved = wait_for(run, "End did not draw the window of the last keys",
                             lambda: (d := long_view.evaluate(NEURON_DRAWN))["first"] == 512 - 48 and d)
            wait_for(run, "the cursor did not stay on the last key",
                     lambda: long_view.evaluate(NEURON_DRAWN)["tip"].startswith("key 511·[SEP]"))
            assert moved["above"] == 512 - 48 and moved["below"] == 0, moved
            long_view.locator("svg image.bvl-k").hover()
            page.mouse.wheel(0, -200)
            wait_for(run, "the wheel did not move the window up three keys",
                     lambda: long_view.evaluate(NEURON_DRAWN)["first"] == 512 - 48 - 3)
            page.set_viewport_size({"width": width, "height": 1100})
            page.mouse.move(5, 5)

        head_view = second.locator("div.bvl-head-view").first
        with run.step("head view: chips choose heads with a click or the keyboard, a hovered token shows its lines"):
            drawn = wait_for(run, "the head view did not draw head 5",
                             lambda: (d := head_view.evaluate(HEAD_VIEW_DRAWN))["heads"] == "5" and d)
            assert drawn["lines"] > 0 and not drawn["hovering"], drawn
            head_view.locator("svg g.bvl-head-chip[data-head='1']").click()
            two = wait_for(run, "a click on chip 1 did not show head 1",
                           lambda: (d := head_view.evaluate(HEAD_VIEW_DRAWN))["heads"] == "1,5" and d)
            assert two["lines"] > drawn["lines"], two
            head_view.locator("svg g.bvl-head-chip[data-head='1']").focus()
            page.keyboard.press("Enter")
            wait_for(run, "Enter on chip 1 did not hide head 1",
                     lambda: head_view.evaluate(HEAD_VIEW_DRAWN)["heads"] == "5")
            head_view.locator("svg text.bvl-query[data-index='3']").hover()
            hovered = wait_for(run, "hovering a query token did not single out its lines",
                               lambda: (d := head_view.evaluate(HEAD_VIEW_DRAWN))["hovering"] and d)
            assert 0 < hovered["lit"] <= 8 and hovered["hidden"] == hovered["lines"] - hovered["lit"], hovered
            picture(run, second, "head_view", pictures)
            page.mouse.move(5, 5)
            wait_for(run, "leaving the token did not show every line again",
                     lambda: not head_view.evaluate(HEAD_VIEW_DRAWN)["hovering"])

        with run.step("a query token clicked in the head view opens the neuron view on it"):
            second.locator(".bvl-head-view svg line").first.wait_for(state="attached")
            second.locator(".bvl-head-view svg text.bvl-query").nth(11).click()
            opened = second.locator("div.bvl-neuron-view").first
            drawn = wait_for(run, "the head view's click did not open the neuron view",
                             lambda: (d := opened.evaluate(NEURON_DRAWN))["visible"] and d["rows"] > 1 and d)
            assert drawn["title"] == "layer 2 · head 5 · query 11·it" and drawn["query"] == 11, drawn
            assert active(second, "neuron view") and all(drawn["blocks"].values()), drawn

        view = second.locator("div.bvl-model-view").first
        with run.step("model view: heads clicked off run the text again and show what changed"):
            button(second, "model view").click()
            before = wait_for(run, "the model view did not draw", lambda: (d := view.evaluate(MODEL_VIEW_DRAWN))[
                "thumbs"] == 6 * 12 and d)
            assert before["ablated"] == "" and before["lines"] == [] and before["mode"] == "open", before
            button(second, "switch it off").click()
            wait_for(run, "the model view did not switch to ablate clicks",
                     lambda: view.evaluate(MODEL_VIEW_DRAWN)["mode"] == "ablate")
            view.locator("svg g.bvl-thumb[data-layer='0'][data-head='3']").click()
            view.locator("svg g.bvl-thumb[data-layer='1'][data-head='7']").click()
            after = wait_for(run, "the heads clicked off did not show their change",
                             lambda: (d := view.evaluate(MODEL_VIEW_DRAWN))["ablated"] == "0:3,1:7" and d["lines"]
                             and d)
            assert after["offMarks"] == 2 and after["badges"] > 0, after
            assert after["title"].endswith("change with 2 head(s) off (zero)") and after["pixels"] != before["pixels"]
            assert after["lines"][0].startswith("[MASK] at 9: ") and " → " in after["lines"][0], after["lines"]
            assert after["lines"][1].startswith("P(IsNext): "), after["lines"]
            assert active(second, "model view")  # a click in ablate mode does not open the heatmap
            summary = second.locator(".bvl-ablation-summary").first.text_content() or ""
            assert "2 heads off (zero)" in summary and "L0 H3, L1 H7" in summary, summary
            view.locator("svg g.bvl-thumb[data-layer='1'][data-head='7']").hover()  # hover reads the drawing
            tip = view.locator(".bvl-tooltip")
            wait_for(run, "no hover box on a head switched off",
                     lambda: tip.is_visible() and "layer 1, head 7 (switched off)" in (tip.text_content() or ""))
            assert "click: switch it on again" in (tip.text_content() or "")

        with run.step("reset switches every head on; shift-click switches one off in open mode"):
            second.locator("button", has_text="reset: all heads on").click()
            reset = wait_for(run, "reset did not bring the heads back",
                             lambda: (d := view.evaluate(MODEL_VIEW_DRAWN))["ablated"] == "" and d)
            assert reset["lines"] == [] and reset["badges"] == 0 and reset["pixels"] == before["pixels"], reset
            button(second, "open it").click()
            wait_for(run, "back to open clicks", lambda: view.evaluate(MODEL_VIEW_DRAWN)["mode"] == "open")
            view.locator("svg g.bvl-thumb[data-layer='0'][data-head='3']").click(modifiers=["Shift"])
            view.locator("svg g.bvl-thumb[data-layer='2'][data-head='1']").focus()
            page.keyboard.press("Shift+Enter")  # the keyboard does what a click does
            shifted = wait_for(run, "shift-clicks did not switch heads off",
                               lambda: (d := view.evaluate(MODEL_VIEW_DRAWN))["ablated"] == "0:3,2:1" and d["lines"]
                               and d)
            assert active(second, "model view") and shifted["offMarks"] == 2, shifted
            focused = view.evaluate("() => { const t = document.activeElement.closest('g.bvl-thumb');"
                                    " return t && t.dataset.layer + ':' + t.dataset.head; }")
            assert focused == "2:1", focused  # the redraws kept the keyboard on the thumbnail it switched off
            picture(run, second, "head_ablation", pictures)
            view.locator("svg g.bvl-thumb[data-layer='4'][data-head='0']").click()  # a plain click opens the head
            wait_for(run, "a plain click did not open the heatmap", lambda: active(second, "heatmap"))

        with run.step("no error outputs after the interactions"):
            assert_no_error_outputs(page, notebook.cells, NAME)
        with run.step("offline: every request went to 127.0.0.1"):
            foreign = sorted({u for u in lab_context.requested[first_request:] + run.sockets if not allowed_url(u)})
            assert not foreign, foreign
        problems = run.failures + run.console
        assert not problems, "\n".join(problems)
        copy_to_readme(pictures)
    finally:
        print(f"\n{NAME}: screenshots {[str(p.relative_to(REPO)) for p in pictures]}")
