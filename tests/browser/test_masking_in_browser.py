"""The masking preview in JupyterLab, in headless Chromium, offline: a typed [MASK] is the masked token; a click on a
token chip masks it in the kernel (the predictions follow), the keyboard alone does the same (the chips are one tab
stop, arrows move, Space/Enter toggle, a visible focus ring, ARIA names and pressed states), and after a reload the
page writes to the same state, which the saved notebook's static copy then shows.

The test writes a small notebook (a MaskingPreview on "The capital of France is [MASK]." with a tiny masked LM
whose decoder bias makes "paris" certain) into the server's folder and runs it. Screenshots of the view in the light
and dark themes go to screenshots/masking_view{,_dark}.png, and with BERTVIZ_LAB_SCREENSHOTS set (tools/screenshots.py)
to the README's pictures as well.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from browser_lab import (
    CONTENT_BOX,
    MODEL_STATIC_COPIES,
    SCREENSHOTS,
    allowed_url,
    copy_to_readme,
    kernel_prints,
    open_and_run,
    reload_notebook,
    save_notebook,
    saved_static_copies,
    set_theme,
)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

TIMEOUT_MS = 120_000
CELLS = [
    "import torch\n"
    "import bertviz_lab as bv\n"
    "from bertviz_lab.widgets import MaskingPreview\n"
    "tokenizer = bv.BERTTokenizerFast.from_pretrained(bv.BERT_Weights.DEFAULT.path)\n"
    "torch.manual_seed(0)\n"
    "mlm = bv.BERTForMaskedLM(bv.BERTConfig.tiny(vocab_size=tokenizer.vocab_size)).eval()\n"
    "with torch.no_grad():\n"
    "    mlm.cls.predictions.decoder.bias[tokenizer.convert_tokens_to_ids('paris')] += 60.0\n"
    "preview = MaskingPreview(tokenizer, 'The capital of France is [MASK].', model=mlm)\n"
    "preview",
]
PICTURE = "masking_view.png"
VIEW = ".jp-OutputArea-output div.bvl-masking-view"
# the kernel's state, printed as JSON: the clicked positions and where the model predicts
STATE = ("import json; print(json.dumps({'chosen': preview.chosen, "
         "'predicted': [p for p, _ in preview.predictions()], 'first': preview.predictions()[0][1][0][0]}))")

# What the live view shows: the masked positions of its drawing, and each chip button's ARIA state and focus.
CHIPS = """(view) => {
  const buttons = [...view.querySelectorAll('g.bvl-chip[data-toggle]')];
  return {masked: view.dataset.masked, mode: view.dataset.mode,
          buttons: buttons.map((g) => ({position: Number(g.dataset.position), role: g.getAttribute('role'),
                                        pressed: g.getAttribute('aria-pressed'), label: g.getAttribute('aria-label'),
                                        tabindex: g.getAttribute('tabindex')})),
          typed: [...view.querySelectorAll('g.bvl-chip[data-position]:not([data-toggle])')]
            .map((g) => Number(g.dataset.position))};
}"""
# The element with the keyboard's focus: which chip, and how its focus ring is drawn.
FOCUS = """() => {
  const el = document.activeElement;
  if (!el || !el.matches('g.bvl-chip[data-toggle]')) return null;
  const style = getComputedStyle(el);
  return {position: Number(el.dataset.position), outline: style.outlineStyle, width: style.outlineWidth,
          visible: el.matches(':focus-visible')};
}"""


# The notebook's model (what a save writes) holds a static copy with `text`.
MODEL_COPY_SHOWS = "(text) => (" + MODEL_STATIC_COPIES + ")().some((html) => html.includes(text))"


def wait_masked(page: Any, masked: str) -> dict:
    """Wait until the live view draws exactly the positions `masked` ("2,6") as [MASK]; what its chips say then."""
    page.wait_for_function(f"() => [...document.querySelectorAll('{VIEW}')].some("
                           f"(v) => v.offsetParent !== null && v.dataset.masked === {json.dumps(masked)})",
                           timeout=TIMEOUT_MS, polling=100)
    return page.locator(VIEW).first.evaluate(CHIPS)


def kernel_state(page: Any) -> dict:
    return json.loads(kernel_prints(page, STATE))


def wait_focus(page: Any, position: int) -> dict:
    page.wait_for_function(f"() => {{ const f = ({FOCUS})(); return !!f && f.position === {position}; }}",
                           timeout=30_000, polling=100)
    return page.evaluate(FOCUS)


def test_a_click_and_the_keyboard_mask_tokens_in_the_kernel(page, lab_server, lab_context):
    first_request = len(lab_context.requested)
    path = open_and_run(page, lab_server, "masking_view.ipynb", CELLS).path

    # the typed [MASK] is the one masked token, predicted ("paris"); the other words are buttons, not pressed
    chips = wait_masked(page, "6")
    assert chips["mode"] == "choose" and chips["typed"] == [0, 6, 8]  # [CLS], the typed [MASK], [SEP]
    assert [b["position"] for b in chips["buttons"]] == [1, 2, 3, 4, 5, 7]
    assert all(b["role"] == "button" and b["pressed"] == "false" for b in chips["buttons"])
    labels = {b["position"]: b["label"] for b in chips["buttons"]}
    assert labels[2] == "token capital at position 2: not masked; Space masks it"
    assert [b["tabindex"] for b in chips["buttons"]].count("0") == 1  # one tab stop for all the chips
    assert kernel_state(page) == {"chosen": [], "predicted": [6], "first": "paris"}

    # a click masks "capital" in the kernel; the drawing and the predictions follow
    view = page.locator(VIEW).first
    view.locator('g.bvl-chip[data-position="2"]').click()
    chips = wait_masked(page, "2,6")
    pressed = {b["position"]: b["pressed"] for b in chips["buttons"]}
    assert pressed[2] == "true" and list(pressed.values()).count("true") == 1
    assert kernel_state(page) == {"chosen": [2], "predicted": [2, 6], "first": "paris"}

    # the keyboard alone: the focus stays on the chip, the arrows move it, Space and Enter toggle, a ring shows it
    view.locator('g.bvl-chip[data-position="2"]').focus()
    page.keyboard.press("ArrowRight")
    focus = wait_focus(page, 3)
    assert focus["visible"] and focus["outline"] == "solid" and focus["width"] == "2px", focus
    page.keyboard.press("Space")
    wait_masked(page, "2,3,6")
    assert wait_focus(page, 3)["visible"]  # back on the chip after the kernel's redraw
    page.keyboard.press("End")
    wait_focus(page, 7)
    page.keyboard.press("Home")
    wait_focus(page, 1)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    wait_focus(page, 3)
    page.keyboard.press("Enter")
    chips = wait_masked(page, "2,6")
    assert {b["position"]: b["pressed"] for b in chips["buttons"]}[3] == "false"
    assert kernel_state(page)["chosen"] == [2]

    # light and dark pictures of the view, the focus ring on a chip
    output = page.locator(".jp-OutputArea-output").filter(has=page.locator("div.bvl-masking-view")).first
    output.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(exist_ok=True)
    picture = SCREENSHOTS / PICTURE
    page.screenshot(path=str(picture), clip=output.evaluate(CONTENT_BOX))
    set_theme(page, "dark")
    ground = "(el) => getComputedStyle(el.querySelector('svg.bvl-masking .bvl-ground')).fill"
    page.wait_for_function(f"(el) => ({ground})(el) !== 'rgb(255, 255, 255)'", arg=view.element_handle(),
                           timeout=30_000, polling=200)
    page.screenshot(path=str(SCREENSHOTS / "masking_view_dark.png"), clip=output.evaluate(CONTENT_BOX))
    set_theme(page, "light")

    # after a reload (kernel alive) the page shows the kernel's state, and a click there writes to it
    save_notebook(page)
    reload_notebook(page, path, TIMEOUT_MS)
    wait_masked(page, "2,6")
    page.locator(VIEW).first.locator('g.bvl-chip[data-position="4"]').click()
    wait_masked(page, "2,4,6")
    assert kernel_state(page) == {"chosen": [2, 4], "predicted": [2, 4, 6], "first": "paris"}
    page.wait_for_function(MODEL_COPY_SHOWS, arg='data-masked="2,4,6"', timeout=30_000, polling=250)
    save_notebook(page)  # the saved notebook's static copy is the kernel's drawing after the click
    copies = saved_static_copies(lab_server.root / path)
    assert len(copies) == 1 and 'data-masked="2,4,6"' in copies[0], copies
    assert "3 masked: 1 typed [MASK], 2 clicked of 6 tokens" in copies[0]

    assert not page.errors, page.errors
    foreign = [url for url in lab_context.requested[first_request:] if not allowed_url(url)]
    assert not foreign, f"requests left the machine: {foreign}"
    copy_to_readme([picture])  # the README's picture, only from a run that passed
