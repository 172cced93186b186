"""The documentation site: `mkdocs build --strict` passes, the API reference lists every public name, the generated
pages hold what they are generated from, and no page asks for anything outside the site's folder."""

from __future__ import annotations

import importlib
import json
import re

import pytest
from markdown_blocks import REPO

from bertviz_lab.train.schema_table import markdown as yaml_keys

MODULES = ["bertviz_lab", "bertviz_lab.trace", "bertviz_lab.widgets", "bertviz_lab.corpus", "bertviz_lab.views"]


def search_locations(site) -> set[str]:
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    return {entry["location"] for entry in index["docs"]}


@pytest.mark.parametrize("module", MODULES)
def test_the_api_reference_lists_every_public_name(site, module):
    names = importlib.import_module(module).__all__
    anchors = {location.partition("#")[2] for location in search_locations(site)}
    missing = [name for name in names if f"{module}.{name}" not in anchors]
    assert not missing, f"{module}: no API entry for {missing}"


def test_the_saliency_module_has_its_own_page(site):
    page = (site / "api" / "trace.saliency.html").read_text(encoding="utf-8")
    assert 'id="bertviz_lab.trace.saliency.saliency"' in page
    assert "integrated" in page.lower()


def test_the_yaml_keys_page_shows_the_table_the_schema_generates(site):
    page = (site / "guides" / "cli.html").read_text(encoding="utf-8")
    rows = [line for line in yaml_keys().splitlines() if line.startswith("| `")]
    keys = [row.split("`")[1] for row in rows]
    assert keys and all(f"<code>{key}</code>" in page for key in keys)
    assert "<!-- yaml-keys -->" not in page


def test_the_workbench_page_shows_the_registered_views_and_their_keys(site):
    from bertviz_lab.widgets import registry

    page = (site / "guides" / "workbench.html").read_text(encoding="utf-8")
    assert "<!-- views -->" not in page and "<!-- view-keys -->" not in page
    for view in registry.REGISTRY:
        assert f"<td>{view.label}</td>" in page, view.name
        if view.magic:
            assert f"<code>--view {view.magic}</code>" in page
    assert page.count("Home/End to the ends") == 1  # the neuron view's keys, from the registry
def test_the_corpus_page_shows_the_head_statistics_registry(site):
    from bertviz_lab.kernels.head_statistics import STATISTICS

    page = (site / "guides" / "corpus-at-scale.html").read_text(encoding="utf-8")
    assert all(f"<code>{s.name}</code>" in page and s.label in page for s in STATISTICS)
    assert "<!-- head-statistics -->" not in page


def test_the_head_statistics_table_has_a_row_per_statistic_in_order():
    import importlib.util

    from bertviz_lab.kernels.head_statistics import STATISTIC_NAMES

    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    markdown = hooks.on_page_markdown("before\n\n<!-- head-statistics -->\n\nafter", None, None, None)
    rows = [line for line in markdown.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(STATISTIC_NAMES)
    assert all(row.count(" | ") == 3 for row in rows)  # no cell breaks the table
    assert "<!-- head-statistics -->" in (REPO / "docs" / "guides" / "corpus-at-scale.md").read_text(encoding="utf-8")


def test_bertvizs_names_find_the_migration_guide_and_the_views_first(site):
    """head_view and model_view are also attribute names of the panels: the pages about bertviz's calls carry a search
    boost, so a search for them lists those pages before an attribute."""
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    boosts = {entry["location"].split("#")[0]: entry.get("boost") for entry in index["docs"]}
    assert boosts["guides/coming-from-bertviz.html"] == 3 and boosts["api/views.html"] == 2
    assert boosts["api/widgets.html"] is None


def test_the_performance_page_includes_the_benchmark_results(site):
    page = (site / "guides" / "performance.html").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", (REPO / "benchmarks" / "README.md").read_text(encoding="utf-8"), re.M)
    assert headings and all(re.sub(r"`([^`]*)`", r"<code>\1</code>", heading) in page for heading in headings)


def test_the_workbench_notebook_page_shows_its_figures(site):
    page = (site / "notebooks" / "00_workbench.html").read_text(encoding="utf-8")
    outputs = page.split('<div class="bvl-output">')[1:]
    assert outputs and any("<svg" in output for output in outputs), "no static copy of a panel on the page"
    inline_scripts = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", page, re.S)
    assert all("bvl" not in script for script in inline_scripts), "a notebook output brought a script"


def test_no_page_loads_anything_from_outside_the_site(site):
    """Every src/href that loads (scripts, styles, images, fonts) is relative; links to other sites may stay."""
    loading = re.compile(r'<(?:script|img|source|iframe)\b[^>]*\bsrc="([^"]+)"|<link\b[^>]*\bhref="([^"]+)"', re.I)
    foreign = {}
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for match in loading.finditer(text):
            url = match.group(1) or match.group(2)
            if re.match(r"^(?:[a-z][a-z0-9+.-]*:|//)", url, re.I) and not url.startswith("data:"):
                foreign.setdefault(str(page.relative_to(site)), set()).add(url)
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, page
    assert not foreign, foreign
    for css in site.rglob("*.css"):
        assert not re.search(r"@import\s+url\(\s*['\"]?https?:", css.read_text(encoding="utf-8")), css


def test_the_site_runs_the_projects_notebooks_and_no_other(tmp_path, monkeypatch):
    """The nav lists the notebooks the repository holds (git's list), and only a listed notebook becomes a page:
    a notebook of one's own beside them is not run by `mkdocs build`."""
    import importlib.util
    import shutil
    import subprocess
    from types import SimpleNamespace

    import yaml

    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    config = {"nav": yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]}
    listed = [path.name for path in hooks.project_notebooks(config)]
    if shutil.which("git") and (REPO / ".git").exists():
        tracked = subprocess.run(["git", "ls-files", "notebooks/*.ipynb"], cwd=REPO, capture_output=True, text=True,
                                 check=True).stdout.split()
        assert listed == sorted(name.split("/")[-1] for name in tracked)
    assert "06_corpus.ipynb" in listed
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in listed:
        shutil.copy(REPO / "notebooks" / name, folder / name)
    (folder / "07_mine.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    monkeypatch.setattr(hooks, "NOTEBOOKS", folder)
    monkeypatch.setattr(hooks, "notebook_page", lambda notebook: f"# {notebook.stem}")
    monkeypatch.setattr(hooks, "API_PAGES", {})
    monkeypatch.setattr(hooks, "notebook_css", lambda: "")
    monkeypatch.setattr(hooks.File, "generated", classmethod(lambda cls, _, uri, content: SimpleNamespace(src_uri=uri)))
    pages = hooks.on_files([], config)
    assert [page.src_uri for page in pages if page.src_uri.startswith("notebooks/")] == [
        f"notebooks/{name[:-6]}.md" for name in listed]
    config["nav"][[i for i, e in enumerate(config["nav"]) if "Notebooks" in e][0]]["Notebooks"].append(
        "notebooks/08_gone.md")
    with pytest.raises(ValueError, match="lists notebooks that do not exist: notebooks/08_gone.ipynb"):
        hooks.project_notebooks(config)
