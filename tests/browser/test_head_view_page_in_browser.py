"""head_view(..., html_action="return") opened in headless Chromium from file://, offline: the layer asked for is
shown; a click on another layer's button, or the arrow keys on the layer buttons, shows that layer's figure alone;
Space on a head's check box hides its lines; hovering a query token leaves only its lines, a key token only the lines
that end at it. No script runs (the page has none) and no request leaves the page's folder."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

WAIT_MS = 60_000

# What the page shows: the figure on screen (set, layer), how many lines of each head are displayed, and how many
# of the shown figure's line groups (one per query and head) and lines are visible.
SHOWN = """() => {
  const shown = [...document.querySelectorAll('.bvl-page-figure')]
    .filter((f) => getComputedStyle(f).display !== 'none');
  const figure = shown[0];
  if (shown.length !== 1) return {count: shown.length};
  const visible = (el) => {  // not hidden itself, and no element around it inside the figure taken out of display
    if (getComputedStyle(el).visibility === 'hidden') return false;
    for (let at = el; at && at !== figure; at = at.parentNode) {
      if (getComputedStyle(at).display === 'none') return false;
    }
    return true;
  };
  const heads = {};
  for (const group of figure.querySelectorAll('g.bvl-head-lines')) heads[group.dataset.head] = visible(group);
  const lines = [...figure.querySelectorAll('g.bvl-head-lines line')].filter(visible);
  return {count: 1, layer: Number(figure.dataset.layer), heads,
          queries: [...new Set(lines.map((l) => Number(l.parentNode.dataset.q)))].sort((a, b) => a - b),
          keys: [...new Set(lines.map((l) => Number(l.dataset.key)))].sort((a, b) => a - b), lines: lines.length};
}"""


def test_the_page_switches_layers_and_heads_and_hover_singles_out_lines(chromium, tmp_path):
    from bertviz_lab import views

    generator = torch.Generator().manual_seed(0)
    attention = tuple(torch.softmax(torch.randn(1, 3, 40, 40, generator=generator) * 3, dim=-1) for _ in range(4))
    tokens = [f"tok{i}" for i in range(40)]
    page_path = tmp_path / "head_view.html"
    page_path.write_text(views.head_view(attention, tokens, layer=2, html_action="return").data, encoding="utf-8")

    folder = page_path.parent.as_uri() + "/"
    context = chromium.new_context(viewport={"width": 1000, "height": 900})
    requests: list[str] = []
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(folder) else route.abort())
    context.on("request", lambda request: requests.append(request.url))
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        page.goto(page_path.as_uri(), wait_until="load")
        state = page.evaluate(SHOWN)
        assert state["count"] == 1 and state["layer"] == 2 and state["queries"] == list(range(40)), state

        page.click("label[for='bvl-layer-0']")
        page.wait_for_function("() => document.querySelector('.bvl-page-figure[data-layer=\"0\"]')"
                               ".checkVisibility()")
        assert page.evaluate(SHOWN)["layer"] == 0
        page.focus("#bvl-layer-0")
        page.keyboard.press("ArrowRight")  # radio buttons: the arrow keys choose the next layer
        page.wait_for_function("() => document.querySelector('.bvl-page-figure[data-layer=\"1\"]')"
                               ".checkVisibility()")
        assert page.evaluate(SHOWN)["count"] == 1

        page.focus("#bvl-head-1")
        page.keyboard.press("Space")  # head 1 off
        page.wait_for_function("() => !document.querySelector('#bvl-head-1').checked")
        state = page.evaluate(SHOWN)
        assert state["heads"] == {"0": True, "1": False, "2": True}, state

        figure = page.locator(".bvl-page-figure[data-layer='1']")
        figure.locator("text.bvl-query[data-index='5']").hover()
        page.wait_for_function(f"() => ({SHOWN})().queries.join() === '5'")
        state = page.evaluate(SHOWN)
        expected = {int(k) for h in (0, 2) for k, w in zip(*reversed(attention[1][0, h, 5].topk(8))) if w >= 0.05}
        assert set(state["keys"]) == expected, (state, expected)

        figure.locator("text.bvl-key[data-index='9']").hover()
        page.wait_for_function(f"() => ({SHOWN})().keys.join() === '9'")
        state = page.evaluate(SHOWN)
        assert 0 < state["lines"] <= 40 * 2, state
    finally:
        context.close()
    assert requests and all(url.startswith(folder) for url in requests), requests
