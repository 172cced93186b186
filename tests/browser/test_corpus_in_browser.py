"""The corpus views in JupyterLab, in headless Chromium, offline: the head atlas, nearest contexts and the query-key
map render from the kernel's drawing; hover shows the value or token the kernel holds; a click opens the text in the
attention panel (its heatmap's title names the new layer and head, its figure the text's tokens); the export button
writes an SVG; after a page reload the views redraw, and a change made in the reloaded page reaches the view and the
static copy a save would store.

The test analyses the first sentences of the built-in corpus with the default model (statistics, hidden states, and
queries and keys) into the server's folder, then writes a notebook with one CorpusPanel per view. Screenshots of each
view in the light and the dark theme go to screenshots/corpus_*.png (and, with BERTVIZ_LAB_SCREENSHOTS set, to the
README's pictures).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from browser_lab import (
    CONTENT_BOX,
    DOM_ERRORS,
    KERNEL_READY,
    MODEL_STATIC_COPIES,
    README_IMAGES_ENV,
    REPO,
    SCREENSHOTS,
    allowed_url,
    kernel_prints,
    live_heatmap_shows,
    open_notebook,
    run_all,
    save_notebook,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

TIMEOUT_MS = 240_000
TEXTS = 80  # the first sentences of the built-in corpus: enough for every view, quick to analyse
SEARCH = "They walked along the river at dawn."
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
VIEWS = {"atlas": "div.bvl-atlas-view", "nearest": "div.bvl-nearest-view", "qk": "div.bvl-qk-map-view"}

# What a corpus view says it shows (its data- attributes) and how many items its drawing holds.
SHOWN = """(el) => ({title: el.dataset.title || '', draws: Number(el.dataset.draws || 0),
  selected: el.dataset.selected === undefined ? null : String(el.dataset.selected),
  texts: Number(el.dataset.texts || 0), matches: Number(el.dataset.matches || 0),
  points: Number(el.dataset.points || 0), cells: el.querySelectorAll('rect.bvl-atlas-cell').length,
  tip: el.querySelector('.bvl-tooltip').style.display === 'block' ? el.querySelector('.bvl-tooltip').textContent : '',
  scripts: el.querySelectorAll('script').length})"""

# The page position of a q-k map point, from the plot's frame and the point's data coordinates.
POINT_AT = """([el, x, y]) => {
  const svg = el.querySelector('svg.bvl-qk-map'), rect = svg.querySelector('rect.bvl-plot');
  const n = (name) => Number(rect.getAttribute(name)), d = rect.dataset;
  const px = n('x') + (x - Number(d.x0)) / (Number(d.x1) - Number(d.x0)) * n('width');
  const py = n('y') + n('height') - (y - Number(d.y0)) / (Number(d.y1) - Number(d.y0)) * n('height');
  const box = svg.getBoundingClientRect(), k = box.width / Number(svg.getAttribute('width'));
  return {x: box.left + px * k, y: box.top + py * k};
}"""


def cells(corpus: Path) -> list[str]:
    return [
        "from bertviz_lab.widgets import CorpusPanel\n"
        f"atlas = CorpusPanel({str(corpus)!r}, stat='cls')\n"
        "atlas",
        f"nearest = CorpusPanel({str(corpus)!r}, view='nearest', query={SEARCH!r}, position=5, "
        "search_layer=4)\n"
        "nearest",
        f"qk = CorpusPanel({str(corpus)!r}, view='qk map', layer=2, head=3, n=150)\n"
        "qk",
    ]


@pytest.fixture(scope="module")
def corpus_folder(lab_server) -> Path:
    """The corpus the notebook opens, analysed once with the default model."""
    from bertviz_lab.corpus import SENTENCES, analyze
    from bertviz_lab.model.auto import load_default

    model, tokenizer = load_default()
    texts = SENTENCES.read_text(encoding="utf-8").splitlines()[:TEXTS]
    out = lab_server.root / "notebooks" / "corpus_sentences"
    analyze(model, tokenizer, texts, out, vectors=("hidden", "qk"), progress=False)
    return out


def in_kernel(page: Any, code: str) -> Any:
    """What the kernel answers to `code`, which prints one JSON line."""
    return json.loads(kernel_prints(page, code).strip().splitlines()[-1])


def shown(view: Any, condition: str = "true", timeout_ms: int = 60_000) -> dict:
    """What a corpus view shows once `condition` (a JS expression over `d`, its SHOWN) holds."""
    view.page.wait_for_function(f"(el) => {{ const d = ({SHOWN})(el); return d.draws > 0 && ({condition}); }}",
                                arg=view.element_handle(), timeout=timeout_ms, polling=200)
    return view.evaluate(SHOWN)


def set_theme(page: Any, theme: str) -> None:
    page.evaluate("(name) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: name})",
                  THEMES[theme])
    page.wait_for_function("(light) => document.body.dataset.jpThemeLight === light",
                           arg="true" if theme == "light" else "false", timeout=30_000, polling=200)


def outputs(page: Any) -> dict[str, Any]:
    """Each panel's live output (the one holding its view), by view."""
    code = page.locator(".jp-Notebook .jp-CodeCell")
    return {name: code.nth(i).locator(".jp-OutputArea-output").filter(has=page.locator(VIEWS[name])).first
            for i, name in enumerate(VIEWS)}


def views(page: Any) -> dict[str, Any]:
    found = outputs(page)
    return {name: found[name].locator(VIEWS[name]) for name in VIEWS}


def attention_of(output: Any) -> Any:
    """The attention panel a corpus panel opened under its views."""
    return output.locator("div.bvl-heatmap-view")


def screenshots(page: Any, theme: str) -> list[Path]:
    SCREENSHOTS.mkdir(exist_ok=True)
    taken = []
    for name, output in outputs(page).items():
        output.locator(VIEWS[name]).scroll_into_view_if_needed()
        path = SCREENSHOTS / f"corpus_{name}_{theme}.png"
        page.screenshot(path=str(path), clip=output.locator(VIEWS[name]).evaluate(CONTENT_BOX))
        taken.append(path)
    return taken


def test_corpus_views_render_hover_open_export_and_redraw_after_a_reload(page, lab_server, lab_context,
                                                                          corpus_folder):
    first_request = len(lab_context.requested)
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.on("console", lambda message: page.errors.append(f"console.error: {message.text}"[:600])
            if message.type == "error" else None)
    path = write_notebook(lab_server, "corpus_views.ipynb", cells(corpus_folder))
    open_notebook(page, lab_server, path, timeout_ms=TIMEOUT_MS)
    run_all(page, TIMEOUT_MS)
    assert not page.evaluate(DOM_ERRORS)
    view = views(page)

    # the three views render the kernel's drawings
    atlas = shown(view["atlas"], "d.cells > 0")
    assert atlas["cells"] == 6 * 12 and atlas["title"] == "head atlas · weight on [CLS]" and atlas["scripts"] == 0
    near = shown(view["nearest"], "d.matches > 0")
    assert near["matches"] == 10 and "“river”" in near["title"] and "layer 4" in near["title"]
    points = shown(view["qk"], "d.points > 0")
    assert points["points"] == 300 and points["title"] == "query–key map · layer 2 · head 3"

    # atlas: hover shows the head's value as the kernel holds it; a click lists its texts; a text opens at that head
    expected = in_kernel(page, "import json; s = atlas.corpus.head_stats(); r = s[(s['layer'] == 2) & "
                               "(s['head'] == 3)].iloc[0]; print(json.dumps([float(r['cls']), int(r['queries'])]))")
    cell = view["atlas"].locator('rect.bvl-atlas-cell[data-layer="2"][data-head="3"]')
    cell.hover()
    tip = shown(view["atlas"], "d.tip !== ''")["tip"]
    assert tip.splitlines() == ["layer 2 · head 3", f"weight on [CLS]: {expected[0]:.4f} share of attention",
                                f"mean over {expected[1]:,} queries"]
    cell.click()
    listed = shown(view["atlas"], "d.selected === '2,3' && d.texts > 0")
    assert listed["texts"] == 10 and "layer 2 · head 3" in listed["title"]
    first = in_kernel(page, "print(json.dumps([atlas.atlas.top_ids[0], atlas.corpus.tokens(atlas.atlas.top_ids[0])]))")
    view["atlas"].locator("g.bvl-top-text").first.click()
    heatmap = live_heatmap_shows(page, "layer 2 · head 3", first[1][2], TIMEOUT_MS)
    assert heatmap["title"].startswith("layer 2 · head 3")
    assert in_kernel(page, "print(json.dumps(atlas.opened['text_id']))") == first[0]

    # nearest: hover shows a match's whole context; a click opens its text at the matched token
    matches = in_kernel(page, "print(json.dumps([nearest.nearest.text_ids, nearest.nearest.positions, "
                              "nearest.nearest.tokens]))")
    view["nearest"].locator("g.bvl-match").nth(0).hover()
    tip = shown(view["nearest"], "d.tip !== ''")["tip"]
    assert tip.startswith(f"#{matches[0][0]} · position {matches[1][0]} · score ")
    assert f"[{matches[2][0]}]" in tip.splitlines()[1]
    view["nearest"].locator("g.bvl-match").nth(1).click()
    shown(view["nearest"], "d.selected === '1'")
    tokens = in_kernel(page, f"print(json.dumps(nearest.corpus.tokens({matches[0][1]})))")
    nearest_output = outputs(page)["nearest"]
    attention_of(nearest_output).wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function("([el, text]) => (el.dataset.title || '').startsWith('layer 4') && "
                           "el.querySelector('svg').textContent.includes(text)",
                           arg=[attention_of(nearest_output).element_handle(), tokens[1]], timeout=TIMEOUT_MS)
    assert in_kernel(page, "print(json.dumps(nearest.opened['position']))") == matches[1][1]

    # q-k map: the pointer over a point shows its kind, token and context; a click opens its text
    point = in_kernel(page, "p = qk.corpus.qk_map(2, 3, n=150); print(json.dumps([float(p['x'][0]), "
                            "float(p['y'][0]), str(p['kind'][0]), str(p['token'][0]), int(p['text_id'][0])]))")
    view["qk"].scroll_into_view_if_needed()
    at = page.evaluate(POINT_AT, [view["qk"].element_handle(), point[0], point[1]])
    page.mouse.move(at["x"], at["y"])
    tip = shown(view["qk"], "d.tip !== ''")["tip"]
    lines = tip.splitlines()
    assert lines[0].split(" · ")[0] in ("query", "key") and "[" in lines[1] and lines[2].startswith("text #")
    page.mouse.click(at["x"], at["y"])
    qk_output = outputs(page)["qk"]
    attention_of(qk_output).wait_for(timeout=TIMEOUT_MS)
    live = page.wait_for_function("(el) => (el.dataset.title || '').startsWith('layer 2 · head 3')",
                                  arg=attention_of(qk_output).element_handle(), timeout=TIMEOUT_MS)
    assert live
    opened = in_kernel(page, "print(json.dumps([qk.opened['text_id'], qk.qk_map.selected]))")
    assert opened[1] >= 0
    page.mouse.move(1, 1)

    # the export button writes the atlas on screen as an SVG next to the notebook
    figures = lab_server.root / "notebooks" / "bertviz_figures"
    existing = set(figures.glob("corpus-atlas-*.svg")) if figures.exists() else set()
    outputs(page)["atlas"].locator("button", has_text="export").first.click()  # the corpus panel's, not its
    # attention panel's
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not set(figures.glob("corpus-atlas-*.svg")) - existing:
        time.sleep(0.3)
    written = sorted(set(figures.glob("corpus-atlas-*.svg")) - existing)
    assert written, "the export button wrote no SVG"
    svg = written[0].read_text(encoding="utf-8")
    assert svg.startswith("<svg") and 'class="bvl-fig bvl-atlas"' in svg and "layer 2 · head 3" in svg
    assert "<script" not in svg

    # pictures of each view, light and dark
    pictures = screenshots(page, "light")
    set_theme(page, "dark")
    ground = "(el) => getComputedStyle(el.querySelector('svg .bvl-ground')).fill"
    page.wait_for_function(f"(el) => ({ground})(el) !== 'rgb(255, 255, 255)'",
                           arg=view["atlas"].element_handle(), timeout=30_000, polling=200)
    pictures += screenshots(page, "dark")
    set_theme(page, "light")

    # the keyboard: the grid is one tab stop whose arrows read head after head, Enter chooses one; Tab reaches its
    # listed texts, Enter opens one
    view["atlas"].locator("g.bvl-atlas-cells").focus()
    shown(view["atlas"], "d.tip.startsWith('layer 2 · head 3')")
    page.keyboard.press("ArrowRight")
    shown(view["atlas"], "d.tip.startsWith('layer 2 · head 4')")
    page.keyboard.press("Enter")
    shown(view["atlas"], "d.selected === '2,4' && d.texts > 0")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    live_heatmap_shows(page, "layer 2 · head 4", "", TIMEOUT_MS)
    assert in_kernel(page, "print(json.dumps(atlas.opened['text_id'] == atlas.atlas.top_ids[0]))") is True

    # after a reload (the kernel lives on) every view redraws from the synced state alone
    before = {name: shown(v) for name, v in view.items()}
    save_notebook(page)
    page.reload(wait_until="domcontentloaded")
    page.wait_for_function(KERNEL_READY, arg=path, timeout=TIMEOUT_MS, polling=250)
    view = views(page)
    for name, v in view.items():
        v.wait_for(timeout=60_000)
        again = shown(v)
        for key in ("title", "selected", "texts", "matches", "points", "cells"):
            assert again[key] == before[name][key], (name, key, again, before[name])

    # a change made in the reloaded page reaches the kernel, the view and the static copy a save stores
    view["atlas"].locator('rect.bvl-atlas-cell[data-layer="0"][data-head="5"]').click()
    changed = shown(view["atlas"], "d.selected === '0,5' && d.texts > 0")
    assert "layer 0 · head 5" in changed["title"]
    page.wait_for_function(f"() => ({MODEL_STATIC_COPIES})().some((html) => html.includes("
                           "'layer 0 · head 5 has the most'))", timeout=30_000, polling=250)

    assert not page.errors, page.errors
    foreign = [url for url in lab_context.requested[first_request:] if not allowed_url(url)]
    assert not foreign, f"requests left the machine: {foreign}"
    images = os.environ.get(README_IMAGES_ENV)
    if images:
        folder = Path(images) if Path(images).is_absolute() else REPO / images
        folder.mkdir(parents=True, exist_ok=True)
        for picture in pictures:
            shutil.copyfile(picture, folder / picture.name)
