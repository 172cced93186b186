"""The built documentation site in headless Chromium, opened from file://: the home page, the API page of
bertviz_lab.trace.saliency and the workbench notebook's page load nothing from outside the site's folder, the
notebook's figures are drawn, and the built-in search answers offline. Screenshots (light and dark) go to
screenshots/docs_*.png."""

from __future__ import annotations

import sys
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


def inside(url: str, site: Path) -> bool:
    """A request the site may make: a file in its folder, inline data or a blob."""
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob"):
        return True
    return parts.scheme == "file" and Path(unquote(parts.path)).resolve().is_relative_to(site.resolve())


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
def test_the_page_opens_from_file_with_nothing_from_outside(site, site_page, scheme, name):
    path, title = PAGES[name]
    site_page.goto((site / path).as_uri())
    site_page.wait_for_function("document.readyState === 'complete'")
    assert title.lower() in site_page.title().lower()
    shown_scheme = site_page.get_attribute("body", "data-md-color-scheme")
    assert shown_scheme == ("slate" if scheme == "dark" else "default")
    foreign = [url for url in site_page.requests if not inside(url, site)]
    assert not foreign, f"{path} asked for {foreign}"
    assert len(site_page.requests) > 3  # its own scripts, styles and pictures were recorded
    assert not site_page.errors, site_page.errors
    SCREENSHOTS.mkdir(exist_ok=True)
    site_page.screenshot(path=str(SCREENSHOTS / f"docs_{name}_{scheme}.png"), full_page=False)


def test_the_workbench_notebook_figures_are_drawn(site, site_page, scheme):
    site_page.goto((site / "notebooks" / "00_workbench.html").as_uri())
    figures = site_page.locator(".bvl-output svg")
    figures.first.wait_for(state="attached")
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
    first.screenshot(path=str(SCREENSHOTS / f"docs_workbench_figure_{scheme}.png"))
    assert all(inside(url, site) for url in site_page.requests)


def test_search_answers_offline(site, site_page, scheme):
    site_page.goto((site / "index.html").as_uri())
    site_page.locator("label.md-search__icon, .md-search__input").first.click()
    site_page.locator("input.md-search__input").fill("saliency")
    results = site_page.locator(".md-search-result__item")
    results.first.wait_for(state="visible", timeout=30_000)
    assert "saliency" in results.first.inner_text().lower()
    assert all(inside(url, site) for url in site_page.requests)
