"""Every text of every view reads in JupyterLab Light and Dark: its colour against what is behind it has a WCAG
contrast ratio of at least 4.5:1, measured as a person sees it (the text's computed colour against the most common
pixel of its box on a screenshot), in headless Chromium, offline. The screenshots of both themes are kept.
"""

from __future__ import annotations

import io
from collections import Counter
from typing import Any

import numpy as np
import pytest
from browser_lab import (
    SCREENSHOTS,
    copy_to_readme,
    open_and_run,
    set_theme,
)

from bertviz_lab.widgets.figures.contrast import contrast_ratio

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

TIMEOUT_MS = 180_000
MIN_CONTRAST = 4.5
TEXT = "The cat sat on the mat because it was warm."
CELLS = [
    "from bertviz_lab.widgets import (AttentionPanel, ArchitecturePanel, DevicePicker, LossCurves, MaskingPreview,\n"
    "                                 Workbench)\n"
    "from bertviz_lab.widgets.panels.models import default_model_and_tokenizer\n"
    f"model, tokenizer = default_model_and_tokenizer()\ntext = {TEXT!r}\n"
    "Workbench(model, tokenizer, text)",
    *(f"AttentionPanel(model=model, tokenizer=tokenizer, text=text, layer=1, head=2, view={view!r})"
      for view in ("head view", "model view", "neuron view", "saliency")),
    "MaskingPreview(tokenizer, text, model=model)",
    "curves = LossCurves(min_interval=0)\n"
    "for step in range(1, 41):\n"
    "    curves({'step': step, 'train_mlm_loss': 8 / step ** 0.5, 'train_nsp_loss': 0.7 / step ** 0.3,\n"
    "            'eval_mlm_accuracy': min(0.9, step / 50) if step % 10 == 0 else None,\n"
    "            'eval_nsp_accuracy': min(0.8, step / 60) if step % 10 == 0 else None, 'lr': 1e-4})\n"
    "curves.flush()\ncurves",
    "DevicePicker(model)",
    "ArchitecturePanel(model)",
]

# Every visible text of the outputs, with its colour and its box in page pixels: HTML text (the element that
# holds a text node) and SVG <text>. Hidden things (display:none, zero size, transparent) are left out.
TEXTS = """() => {
  const found = [];
  const seen = new Set();
  const visible = (el) => {
    const style = getComputedStyle(el);
    if (style.visibility !== 'visible' || Number(style.opacity) === 0) return false;
    for (let e = el; e; e = e.parentElement) if (getComputedStyle(e).display === 'none') return false;
    return true;
  };
  // only what the notebook's scroller shows: texts under Lab's tool and status bars are not seen as they are
  const scroller = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
  const port = scroller ? scroller.getBoundingClientRect() : {top: 0, left: 0, bottom: innerHeight, right: innerWidth};
  const inside = (box, frame) => box.top >= frame.top - 0.5 && box.bottom <= frame.bottom + 0.5 &&
    box.left >= frame.left - 0.5 && box.right <= frame.right + 0.5;
  // a text scrolled out of a box that clips (a zoomed diagram, a scroll area) is not seen either
  const shownBy = (el, box) => {
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
      if (getComputedStyle(e).overflow !== 'visible' && !inside(box, e.getBoundingClientRect())) return false;
    }
    return true;
  };
  for (const output of document.querySelectorAll('.jp-OutputArea-output')) {
    const walker = document.createTreeWalker(output, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      const text = node.textContent.trim();
      if (!text) continue;
      const el = node.parentElement.closest('text') || node.parentElement;
      if (seen.has(el) || el.closest('style, script, title, option, select') || !visible(el)) continue;
      seen.add(el);
      const range = document.createRange();
      range.selectNodeContents(el.tagName.toLowerCase() === 'text' ? el : node);
      const box = range.getBoundingClientRect();
      if (box.width < 2 || box.height < 4) continue;
      if (!inside(box, port) || !shownBy(el, box)) continue;
      const style = getComputedStyle(el);
      const svg = el instanceof SVGElement;
      const owner = el.closest('[class*="bvl-"]');
      found.push({text: text.slice(0, 60), where: owner ? owner.getAttribute('class') : el.tagName,
                  color: svg ? style.fill : style.color,
                  opacity: svg ? Number(style.fillOpacity) : 1,
                  box: [box.left, box.top, box.width, box.height]});
    }
  }
  return found;
}"""


def parse_color(value: str) -> tuple[float, float, float, float]:
    """rgb()/rgba() as CSS computes it: (r, g, b) 0..255 and alpha 0..1."""
    inside = value[value.index("(") + 1:value.rindex(")")].replace("/", " ").replace(",", " ").split()
    numbers = [float(v.rstrip("%")) for v in inside]
    return numbers[0], numbers[1], numbers[2], numbers[3] if len(numbers) > 3 else 1.0


def contrast(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    """WCAG ratio of two measured colours (figures.contrast takes #rrggbb)."""
    return contrast_ratio(*("#%02x%02x%02x" % tuple(round(c) for c in color) for color in (a, b)))


def test_contrast_formula():
    assert contrast((0, 0, 0), (255, 255, 255)) == pytest.approx(21)
    assert contrast((118, 118, 118), (255, 255, 255)) == pytest.approx(4.54, abs=0.01)  # #767676, the classic pass
    assert parse_color("rgba(0, 0, 0, 0.54)") == (0, 0, 0, 0.54)


def background_of(image: Any, box: list[float]) -> tuple[int, int, int]:
    """The most common colour of the screenshot inside `box`: what the text is drawn on."""
    left, top, width, height = (round(v) for v in box)
    crop = image.crop((max(0, left), max(0, top), min(image.width, left + width), min(image.height, top + height)))
    pixels = np.asarray(crop.convert("RGB")).reshape(-1, 3)
    return Counter(map(tuple, pixels.tolist())).most_common(1)[0][0]


def low_contrast(page: Any) -> tuple[list[dict], int]:
    """Texts below MIN_CONTRAST in the viewport as it is now, and how many were measured."""
    from PIL import Image

    shot = page.screenshot()
    image = Image.open(io.BytesIO(shot)).convert("RGB")
    failures, measured = [], 0
    for item in page.evaluate(TEXTS):
        left, top, width, height = item["box"]
        if top + height <= 0 or top >= image.height or left >= image.width or left + width <= 0:
            continue
        ground = background_of(image, item["box"])
        r, g, b, alpha = parse_color(item["color"])
        alpha *= item["opacity"]
        ink = tuple(alpha * c + (1 - alpha) * g0 for c, g0 in zip((r, g, b), ground))
        ratio = contrast(ink, ground)
        measured += 1
        if ratio < MIN_CONTRAST:
            failures.append({**item, "ground": ground, "ratio": round(ratio, 2)})
    return failures, measured


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_every_text_reads_in_the_theme(theme, page, lab_server):
    try:
        open_and_run(page, lab_server, f"themes_{theme}.ipynb", CELLS, timeout_ms=TIMEOUT_MS, theme=theme)
        # every panel drawn: each live view says what it drew in data-title once its figure is on screen
        page.wait_for_function("() => document.querySelectorAll('.jp-OutputArea-output svg.bvl-fig').length >= 9",
                               timeout=TIMEOUT_MS, polling=500)
        outputs = page.locator(".jp-OutputArea-output:visible")
        failures, measured = [], 0
        for index in range(outputs.count()):
            output = outputs.nth(index)
            output.scroll_into_view_if_needed()
            found, count = low_contrast(page)
            failures += found
            measured += count
        SCREENSHOTS.mkdir(exist_ok=True)
        picture = SCREENSHOTS / f"theme-{theme}.png"
        page.locator(".jp-OutputArea-output:has(.widget-tab)").first.screenshot(path=str(picture))
        unique = {(f["text"], f["color"], f["ground"]): f for f in failures}
        assert measured > 100, f"only {measured} texts measured: the views did not draw"
        assert not unique, f"{len(unique)} texts below {MIN_CONTRAST}:1 in {theme}: {list(unique.values())[:15]}"
        copy_to_readme([picture])  # the README's picture, only from a run that passed
    finally:
        set_theme(page, "light")  # the theme is a user setting of the shared server: leave it as found
