"""A notebook as one HTML page that asks nothing of the network: nbconvert's lab page without its CDN scripts.

`jupyter nbconvert --to html` pages load require.js and MathJax from public CDNs (and the widget renderer when the
notebook holds widget state). The panels' static copies need none of it, so offline the figures show either way; this
page simply makes no such request (markdown maths then shows as TeX source).

    bertviz-lab html NOTEBOOK.ipynb [--execute] [--output PAGE.html]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TEMPLATES = Path(__file__).with_name("templates")
TEMPLATE = "bertviz_offline"


def notebook_to_html(notebook: str | Path, output: str | Path | None = None, execute: bool = False,
                     timeout: int = 600) -> Path:
    """Write `notebook` as an offline HTML page (beside it, same name, unless `output`); `execute` runs it first."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import ExecutePreprocessor

    notebook = Path(notebook)
    if not notebook.is_file():
        raise FileNotFoundError(f"no notebook at {notebook}")
    node = nbformat.read(notebook, as_version=4)
    if execute:
        ExecutePreprocessor(timeout=timeout).preprocess(node, {"metadata": {"path": str(notebook.parent)}})
    exporter = HTMLExporter(template_name=TEMPLATE, extra_template_basedirs=[str(TEMPLATES)])
    page, _ = exporter.from_notebook_node(node, resources={"metadata": {"name": notebook.stem}})
    output = Path(output) if output is not None else notebook.with_suffix(".html")
    output.write_text(page, encoding="utf-8")
    return output


def main(argv: list[str] | None = None) -> int:
    """`bertviz-lab html`: one line naming the page written, or the error (exit 2)."""
    parser = argparse.ArgumentParser(prog="bertviz-lab html", description=__doc__.splitlines()[0])
    parser.add_argument("notebook", help="the .ipynb file")
    parser.add_argument("--execute", action="store_true", help="run the notebook first")
    parser.add_argument("--output", help="the page to write (default: the notebook's name with .html)")
    args = parser.parse_args(argv)
    try:
        page = notebook_to_html(args.notebook, args.output, args.execute)
    except (OSError, ValueError) as error:
        print(f"bertviz-lab html: error: {error}", file=sys.stderr)
        return 2
    print(page)
    return 0
