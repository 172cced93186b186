"""Every known XSS vector of tests/data/xss_vectors.txt, one notebook output each, written by `bertviz-lab html` and
opened in headless Chromium from disk: no script runs (no dialog, no mark, no title change, no navigation), also
while the mouse sweeps the page and the keyboard walks its focus, and no request leaves the page's folder. The same
vectors in a page that skips the sanitiser do run and fetch, so the harness sees what it looks for."""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest

from bertviz_lab.cli import main
from bertviz_lab.widgets.notebook_html import POLICY_META

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

DATA = Path(__file__).resolve().parents[1] / "data" / "xss_vectors.txt"
# the vectors call alert/confirm/prompt/print; each call is recorded before any dialog would open
RECORD_CALLS = """
window.__ran = [];
for (const name of ['alert', 'confirm', 'prompt', 'print']) {
  window[name] = (...args) => { window.__ran.push(name + '(' + args.join(',') + ')'); };
}
"""
STATE = "() => ({ran: window.__ran || [], title: document.title, url: location.href})"


def vectors() -> list[str]:
    lines = DATA.read_text(encoding="utf-8").splitlines()
    return [re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), line)
            for line in lines if line.strip() and not line.startswith("#")]


def visit(chromium, page_path: Path, wait_until: str = "load") -> dict:
    """Open the page with every request logged (those outside its folder aborted), sweep the mouse over it and tab
    through it; what ran, what was asked for, where the page ended."""
    folder = page_path.parent.as_uri() + "/"
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    requests, dialogs = [], []
    try:
        context.add_init_script(RECORD_CALLS)
        context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(folder) else r.abort())
        context.on("request", lambda request: requests.append(request.url))
        page = context.new_page()
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(page_path.as_uri(), wait_until=wait_until)
        height = page.evaluate("document.documentElement.scrollHeight")
        for y in range(0, min(height, 40_000), 120):  # onmouseover and friends, down the whole page
            page.evaluate(f"window.scrollTo(0, {max(0, y - 450)})")
            for x in (20, 400):
                page.mouse.move(x, min(y, 450) + 5)
        for _ in range(40):  # onfocus, autofocus
            page.keyboard.press("Tab")
        state = page.evaluate(STATE)
        for frame in page.frames[1:]:  # what ran inside frames (the unsanitised control's)
            try:
                state["ran"] += frame.evaluate("window.__ran || []")
            except Exception:  # a frame that navigated away or closed meanwhile
                continue
    finally:
        context.close()
    outside = [url for url in requests if not url.startswith(folder) and not url.startswith(("data:", "about:"))]
    return {**state, "dialogs": dialogs, "outside": outside}


def test_no_vector_runs_or_fetches_in_the_offline_page(chromium, tmp_path):
    cells = [nbformat.v4.new_code_cell(f"vector({i})", execution_count=i + 1, outputs=[
        nbformat.v4.new_output("display_data", data={"text/html": vector, "text/plain": "vector"})])
        for i, vector in enumerate(vectors())]
    folder = tmp_path / "received"
    folder.mkdir()
    notebook = folder / "vectors.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), notebook)
    page = folder / "vectors.html"
    assert main(["html", str(notebook), "--output", str(page)]) == 0
    # the sanitiser alone must hold: the page's Content-Security-Policy is taken out
    page.write_text(page.read_text(encoding="utf-8").replace(POLICY_META, ""), encoding="utf-8")
    assert POLICY_META not in page.read_text(encoding="utf-8")
    seen = visit(chromium, page)
    assert seen["ran"] == [] and seen["dialogs"] == [], seen
    assert seen["outside"] == [], seen["outside"]
    assert seen["title"] == "vectors" and seen["url"] == page.as_uri(), seen


def test_unsanitised_the_same_vectors_run_and_fetch(chromium, tmp_path):
    """The control: the vectors as they are, each in a frame of its own (a navigating vector leaves the others)."""
    frames = "".join(f'<iframe sandbox="allow-scripts allow-same-origin" srcdoc="{html.escape(vector)}"></iframe>'
                     for vector in vectors())
    page = tmp_path / "raw.html"
    page.write_text(f"<!doctype html><title>raw</title>{frames}", encoding="utf-8")
    seen = visit(chromium, page, wait_until="domcontentloaded")  # a frame may never finish loading
    ran = len(seen["ran"]) + len(seen["dialogs"])
    assert ran >= 50 and len(seen["outside"]) >= 50, (ran, seen["outside"])  # 93 and 112 when written
