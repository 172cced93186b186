"""The built documentation site in headless Chromium: the home page, the API page of bertviz_lab.trace.saliency and
the workbench notebook's page, served from the site's folder on 127.0.0.1, load nothing from anywhere else, the
notebook's figures are drawn and the built-in search answers. Screenshots (light and dark) go to
screenshots/docs_*.png."""

from __future__ import annotations

import functools
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from browser_lab import SCREENSHOTS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs"))
from site_build import build_site  # noqa: E402  (tests/docs: one build per session, shared with its tests)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

PAGES = {
    "home": ("index.html", "bertviz_lab"),
    "saliency_api": ("api/trace.saliency.html", "bertviz_lab.trace.saliency"),
    "workbench_notebook": ("notebooks/00_workbench.html", "workbench"),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder, done, _ = build_site(tmp_path_factory.mktemp("site") / "site")
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return folder


@pytest.fixture(scope="module")
def served(site):
    """The site's folder over HTTP on 127.0.0.1 (a free port); its base URL."""
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def inside(url: str, site: Path, base: str | None = None) -> bool:
    """A request the site may make: a file of its folder (over file:// or its server), inline data or a blob."""
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob") or (base is not None and url.startswith(base)):
        return True
    return parts.scheme == "file" and Path(unquote(parts.path)).resolve().is_relative_to(site.resolve())


def wait_for_scheme(page, scheme: str) -> None:
    """Until Material has applied the palette the browser's colour scheme asks for."""
    expected = "slate" if scheme == "dark" else "default"
    page.wait_for_function(f"document.body.getAttribute('data-md-color-scheme') === '{expected}'")


@pytest.fixture(params=["light", "dark"])
def scheme(request):
    return request.param


@pytest.fixture
def site_page(chromium, scheme):
    context = chromium.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.requests = []
    page.errors = []
    page.on("request", lambda request: page.requests.append(request.url))
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    try:
        yield page
    finally:
        context.close()


@pytest.mark.parametrize("name", list(PAGES))
def test_the_page_loads_nothing_from_outside_the_site(site, served, site_page, scheme, name):
    path, title = PAGES[name]
    site_page.goto(served + path)
    site_page.wait_for_function("document.readyState === 'complete'")
    wait_for_scheme(site_page, scheme)
    assert title.lower() in site_page.title().lower()
    foreign = [url for url in site_page.requests if not inside(url, site, served)]
    assert not foreign, f"{path} asked for {foreign}"
    assert len(site_page.requests) > 3  # its own scripts, styles and pictures were recorded
    assert not site_page.errors, site_page.errors
    SCREENSHOTS.mkdir(exist_ok=True)
    site_page.screenshot(path=str(SCREENSHOTS / f"docs_{name}_{scheme}.png"), full_page=False)


def test_the_workbench_notebook_figures_are_drawn(site, served, site_page, scheme):
    site_page.goto(served + "notebooks/00_workbench.html")
    site_page.locator(".bvl-output svg").first.wait_for(state="attached")
    wait_for_scheme(site_page, scheme)
    drawn = site_page.evaluate("""() => [...document.querySelectorAll('.bvl-output svg')].map(svg => {
        const box = svg.getBoundingClientRect();
        return {width: box.width, height: box.height,
                marks: svg.querySelectorAll('rect, path, line, circle, polygon, image, text').length};
    }).filter(figure => figure.width > 50 && figure.height > 50 && figure.marks > 10)""")
    assert drawn, "no figure of the notebook is drawn with a size and content"
    images = site_page.evaluate("""() => [...document.querySelectorAll('.bvl-output svg image')]
        .map(image => image.getBBox().width * image.getBBox().height)""")
    assert all(area > 0 for area in images)
    first = site_page.locator(".bvl-output").filter(has=site_page.locator("svg")).first
    first.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(exist_ok=True)
    first.screenshot(path=str(SCREENSHOTS / f"docs_workbench_figure_{scheme}.png"))
    assert all(inside(url, site, served) for url in site_page.requests)


def test_the_built_in_search_answers(site, served, site_page, scheme):
    site_page.goto(served + "index.html")
    wait_for_scheme(site_page, scheme)
    site_page.locator("label.md-search__icon, .md-search__input").first.click()
    # typed key by key as a user does: the theme reads the box on keyup (and once when its index is ready), so a
    # value set without key events is never searched when the index was ready first
    site_page.locator("input.md-search__input").press_sequentially("saliency")
    results = site_page.locator(".md-search-result__item")
    results.first.wait_for(state="visible", timeout=90_000)  # the search index is built in a worker, after load
    assert "saliency" in results.first.inner_text().lower()
    assert all(inside(url, site, served) for url in site_page.requests)
