"""Every Python block of README.md and docs/ runs as printed: blocks of one page share a namespace and run in order,
offline, on the CPU, in an empty folder; a block marked `<!-- skip: reason -->` is reported with its reason."""

from __future__ import annotations

import gc
import time
import warnings

import pytest
from markdown_blocks import REPO, markdown_pages, python_blocks

PAGES = [page for page in markdown_pages() if python_blocks(page)]


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(REPO)) for page in PAGES])
def test_every_python_block_runs_as_printed(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks that save (checkpoints, "my-bert") write here
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BERTVIZ_LAB_CACHE", str(tmp_path / "cache"))
    namespace: dict = {"__name__": "__main__"}
    skipped = []
    started = time.perf_counter()
    for block in python_blocks(page):
        if block.skip is not None:
            assert block.skip, f"{block.where()}: a skipped block says why"
            skipped.append(f"{block.where()}: {block.skip}")
            continue
        try:
            exec(compile(block.source, block.where(), "exec"), namespace)
        except Exception as error:
            pytest.fail(f"the block at {block.where()} raised {type(error).__name__}: {error}", pytrace=False)
    for value in namespace.values():  # panels release their widgets and traces
        if hasattr(value, "close") and type(value).__module__.startswith("bertviz_lab.widgets"):
            value.close()
    namespace.clear()
    gc.collect()
    if skipped:
        warnings.warn(f"{page.relative_to(REPO)}: not run here: " + "; ".join(skipped), stacklevel=1)
    print(f"{page.relative_to(REPO)}: {time.perf_counter() - started:.1f} s")


def test_blocks_are_read_in_order_with_their_skip_reasons(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "# A page", "", "```python", "a = 1", "```", "<!-- skip: needs a GPU -->", "```python", "b = a.cuda()", "```",
        "```bash", "echo no", "```", "1. a list item", "", "   ```python", "   c = a + 1", "   ```", "",
        "<!-- a comment, not a skip -->", "```python", "d = c", "```"]), encoding="utf-8")
    blocks = python_blocks(page)
    assert [(block.line, block.source, block.skip) for block in blocks] == [
        (3, "a = 1", None), (7, "b = a.cuda()", "needs a GPU"), (15, "c = a + 1", None), (20, "d = c", None)]
    assert blocks[1].where() == f"{page}:7"


def test_the_readme_and_the_guides_have_blocks_to_run():
    pages = {page.name for page in PAGES}
    assert {"README.md", "getting-started.md", "tracing.md", "inside-attention.md"} <= pages
