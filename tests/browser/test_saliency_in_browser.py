"""The saliency view in JupyterLab, in headless Chromium, offline: it shows the kernel's drawing of every token (also
after a reload), hover and the keyboard show the exact score the kernel computed, a toolbar change computes again,
its export button writes an SVG, and in the dark theme the text on every token box still reads (4.5:1).

The test writes a small notebook (a SaliencyPanel on the default model, a sentence pair with an HTML-looking word)
into the server's folder and runs it. A screenshot of the view goes to screenshots/saliency_view.png, and with
BERTVIZ_LAB_SCREENSHOTS set (tools/screenshots.py) to the README's pictures as well.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from browser_lab import (
    CONTENT_BOX,
    SCREENSHOTS,
    allowed_url,
    copy_to_readme,
    open_and_run,
    reload_notebook,
    save_notebook,
    set_theme,
)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

TIMEOUT_MS = 120_000
TEXT, TEXT_B = "The cat sat on the mat because it was warm.", "It stayed there <script> all afternoon."
CELLS = [
    "from bertviz_lab.widgets import SaliencyPanel\n"
    f"panel = SaliencyPanel(text={TEXT!r}, text_b={TEXT_B!r})\n"
    "panel",
    "import json\n"
    "from bertviz_lab.widgets.figures.saliency import score_text\n"
    "print('SCORES=' + json.dumps({'tokens': panel.tokens, 'scores': [score_text(s) for s in panel.scores]}))",
]
PICTURE = "saliency_view.png"
FIGURE = "div.bvl-saliency-view svg.bvl-saliency"

# What the live view shows: the drawing's state (its data- attributes), its token boxes' text and fills, the colour bar.
DRAWN = """(el) => {
  const svg = el.querySelector('svg.bvl-saliency');
  const tokens = [...svg.querySelectorAll('g.bvl-token')].map((g) => ({
    text: g.querySelector('text').textContent, fill: g.querySelector('rect.bvl-token-box').getAttribute('fill')}));
  return {status: svg.dataset.status, count: Number(svg.dataset.tokens), title: svg.dataset.title || '',
          subtitle: svg.dataset.subtitle || '', tokens, bands: svg.querySelectorAll('.bvl-colorbar rect').length,
          segments: [...svg.querySelectorAll('.bvl-segment')].map((t) => t.textContent),
          scripts: el.querySelectorAll('script').length};
}"""

# Each token's text colour as the page paints it, against its box's fill: the lowest WCAG contrast of them all.
LOWEST_INK_CONTRAST = """(el) => {
  const rgb = (text) => text.startsWith('#') ? [1, 3, 5].map((i) => parseInt(text.slice(i, i + 2), 16))
    : text.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => {
    const [r, g, b] = c.map((v) => v / 255).map((v) => v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  let lowest = 21;
  for (const g of el.querySelectorAll('svg.bvl-saliency g.bvl-token')) {
    const ink = lum(rgb(getComputedStyle(g.querySelector('text')).fill));
    const box = lum(rgb(getComputedStyle(g.querySelector('rect.bvl-token-box')).fill));
    lowest = Math.min(lowest, (Math.max(ink, box) + 0.05) / (Math.min(ink, box) + 0.05));
  }
  return lowest;
}"""

# The static copy (hidden while the live view draws) follows a figure computed in the background, so a saved
# notebook shows what was on screen.
STATIC_COPY_SAYS = """(text) => [...document.querySelectorAll('[data-bvl-static]')].some(
  (copy) => copy.querySelector('svg.bvl-saliency') && copy.textContent.includes(text))"""
LONG_STEPS = 384  # integrated gradients over this many steps takes seconds on the default model

# Every text the progress line shows, in order, kept in the page (a poll could miss one).
WATCH_PROGRESS = """(el) => {
  window.__bvlProgress = [];
  const said = el.querySelector('.bvl-saliency-progress span');
  new MutationObserver(() => window.__bvlProgress.push(said.textContent))
    .observe(said, {childList: true, characterData: true, subtree: true});
}"""
# A run under way with some of its steps done.
PROGRESS_UNDER_WAY = """([el, total]) => {
  const found = /^Integrated gradients: (\\d+)\\/(\\d+) steps$/.exec(
    el.querySelector('.bvl-saliency-progress span').textContent);
  return !!found && Number(found[2]) === total && Number(found[1]) > 0 && Number(found[1]) < total;
}"""
# The view while a run goes: its figure's state, the dimming, the progress line and bar.
BUSY = """(el) => {
  const svg = el.querySelector('svg.bvl-saliency');
  const body = svg.querySelector('g.bvl-body');
  const line = el.querySelector('.bvl-saliency-progress');
  return {status: svg.dataset.status, title: svg.dataset.title, busy: el.classList.contains('bvl-busy'),
          opacity: body ? Number(getComputedStyle(body).opacity) : 1,
          progress: line.style.display === 'none' ? '' : line.textContent,
          bar: Number(line.querySelector('progress').value)};
}"""


def printed_scores(page: Any) -> dict:
    text = page.locator(".jp-OutputArea-output").filter(has_text="SCORES=").first.inner_text()
    return json.loads(text.split("SCORES=", 1)[1].strip())


def wait_drawn(view: Any, condition: str = "true", timeout_s: float = 60) -> dict:
    """What the view shows once its drawing is a finished figure and `condition` (a JS expression over `d`, the
    drawing's data- attributes) holds."""
    view.page.wait_for_function(
        f"(el) => {{ const s = el.querySelector('svg.bvl-saliency'); const d = s ? s.dataset : {{}}; "
        f"return d.status === 'ready' && Number(d.tokens) > 0 && ({condition}); }}",
        arg=view.element_handle(), timeout=timeout_s * 1000, polling=200)
    return view.evaluate(DRAWN)


def test_the_saliency_view_renders_and_exports(page, lab_server, lab_context):
    first_request = len(lab_context.requested)
    page.on("console", lambda message: page.errors.append(f"console.error: {message.text}"[:600])
            if message.type == "error" else None)
    path = open_and_run(page, lab_server, "saliency_view.ipynb", CELLS).path
    output = page.locator(".jp-OutputArea-output").filter(has=page.locator(FIGURE)).first
    view = output.locator("div.bvl-saliency-view")
    drawn = wait_drawn(view)
    expected = printed_scores(page)

    # every token drawn as text (the HTML-looking one too), in order, with a fill; title, target, A / B, colour bar
    assert drawn["count"] == len(expected["tokens"]) == len(drawn["tokens"])
    assert [t["text"] for t in drawn["tokens"]] == expected["tokens"]
    assert "<" in expected["tokens"] and "script" in expected["tokens"] and drawn["scripts"] == 0
    assert all(t["fill"].startswith("#") for t in drawn["tokens"])
    assert "integrated gradients" in drawn["title"] and "64 steps" in drawn["title"]
    assert drawn["subtitle"].startswith("target: ") and "[CLS]" in drawn["subtitle"]
    assert drawn["segments"] == ["A", "B"] and drawn["bands"] > 60
    assert output.locator(".bvl-saliency-toolbar").is_visible()

    # hover shows the exact score the kernel holds
    index = expected["tokens"].index("cat")
    view.locator("g.bvl-token").nth(index).hover()
    tip = view.locator(".bvl-tooltip")
    tip.wait_for(state="visible")
    assert tip.inner_text().splitlines() == [f"{index} · cat", f"score {expected['scores'][index]}"]
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "saliency_view_hover.png"), clip=output.evaluate(CONTENT_BOX))
    page.mouse.move(1, 1)
    tip.wait_for(state="hidden")

    # the keyboard: the tokens are one tab stop, the arrow keys move along them and show each one's score
    view.locator("g.bvl-token").first.focus()
    tip.wait_for(state="visible")
    assert tip.inner_text().splitlines()[0] == f"0 · {expected['tokens'][0]}"
    for _ in range(index):
        page.keyboard.press("ArrowRight")
    page.wait_for_function("([el, text]) => el.textContent.startsWith(text)",
                           arg=[tip.element_handle(), f"{index} · cat"], timeout=10_000, polling=100)
    assert tip.inner_text().splitlines() == [f"{index} · cat", f"score {expected['scores'][index]}"]
    assert view.locator("g.bvl-token[tabindex='0']").count() == 1
    page.keyboard.press("Escape")
    page.mouse.click(1, 1)

    output.scroll_into_view_if_needed()
    picture = SCREENSHOTS / PICTURE
    page.screenshot(path=str(picture), clip=output.evaluate(CONTENT_BOX))

    # a toolbar change computes again in the kernel (in the background); the view and the static copy follow
    output.locator("button", has_text="gradient × input").click()
    drawn = wait_drawn(view, "d.title.includes('gradient × input')")
    assert drawn["count"] == len(expected["tokens"])
    page.wait_for_function(STATIC_COPY_SAYS, arg="gradient × input", timeout=10_000, polling=250)

    # the export button writes the figure on screen as an SVG next to the notebook
    figures = lab_server.root / "notebooks" / "bertviz_figures"
    existing = set(figures.glob("saliency-*.svg")) if figures.exists() else set()
    output.locator("button", has_text="export").click()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not set(figures.glob("saliency-*.svg")) - existing:
        time.sleep(0.3)
    written = sorted(set(figures.glob("saliency-*.svg")) - existing)
    assert written, "the export button wrote no SVG"
    svg = written[0].read_text(encoding="utf-8")
    assert svg.startswith("<svg") and 'class="bvl-fig bvl-saliency"' in svg and "gradient × input" in svg
    assert "&lt;" in svg and "<script" not in svg
    output.locator(".bvl-export-status", has_text="saved").wait_for(state="visible", timeout=10_000)

    # a long run says how far it is: "Integrated gradients: n/384 steps" over the previous figure, dimmed
    output.locator("button", has_text="integrated gradients").click()
    wait_drawn(view, "d.title.includes('integrated gradients') && d.title.includes('64 steps')")  # kept: at once
    view.evaluate(WATCH_PROGRESS)
    steps = output.locator(".bvl-saliency-toolbar .widget-hbox", has_text="steps").locator("input").first
    steps.fill(str(LONG_STEPS))
    steps.press("Enter")
    page.wait_for_function(PROGRESS_UNDER_WAY, arg=[view.element_handle(), LONG_STEPS], timeout=60_000, polling=50)
    busy = view.evaluate(BUSY)
    assert busy["status"] == "computing" and busy["busy"] and busy["opacity"] < 1, busy
    assert busy["title"].startswith("computing … Saliency · integrated gradients") and busy["bar"] > 0, busy
    page.screenshot(path=str(SCREENSHOTS / "saliency_progress.png"), clip=output.evaluate(CONTENT_BOX))
    wait_drawn(view, f"d.title.includes('{LONG_STEPS} steps')", timeout_s=120)
    seen = view.evaluate("() => window.__bvlProgress")
    pattern = re.compile(rf"^Integrated gradients: (\d+)/{LONG_STEPS} steps$")
    done = [int(pattern.match(text).group(1)) for text in seen if pattern.match(text)]
    assert done and any(0 < d < LONG_STEPS for d in done) and done == sorted(done), seen
    assert view.evaluate(BUSY)["progress"] == "" and not view.evaluate(BUSY)["busy"]
    output.locator("button", has_text="gradient × input").click()
    wait_drawn(view, "d.title.includes('gradient × input')")

    # in JupyterLab Dark the page's colours change and the text on every token box still reads
    assert view.evaluate(LOWEST_INK_CONTRAST) >= 4.5
    set_theme(page, "dark")
    ground = "(el) => getComputedStyle(el.querySelector('svg.bvl-saliency .bvl-ground')).fill"
    page.wait_for_function(f"(el) => ({ground})(el) !== 'rgb(255, 255, 255)'", arg=view.element_handle(),
                           timeout=30_000, polling=200)
    assert view.evaluate(LOWEST_INK_CONTRAST) >= 4.5
    output.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "saliency_view_dark.png"), clip=output.evaluate(CONTENT_BOX))
    set_theme(page, "light")

    # after a reload (kernel alive) the view shows the same figure from the synced state alone
    save_notebook(page)
    reload_notebook(page, path, TIMEOUT_MS)
    view = page.locator(".jp-OutputArea-output div.bvl-saliency-view").first
    view.wait_for(timeout=30_000)
    again = wait_drawn(view, "d.title.includes('gradient × input')")
    assert again == drawn

    assert not page.errors, page.errors
    foreign = [url for url in lab_context.requested[first_request:] if not allowed_url(url)]
    assert not foreign, f"requests left the machine: {foreign}"
    copy_to_readme([picture])  # the README's picture, only from a run that passed
