"""MkDocs hooks: the pages generated at build time, so none of them is a hand-kept copy.

- `notebooks/NAME.md` for each of the project's notebooks, `notebooks/NAME.ipynb`, that mkdocs.yml's nav lists
  under Notebooks (a notebook of your own in that folder is neither run nor shown): run through the same executor
  and sanitiser as `bertviz-lab html --execute` (bertviz_lab/widgets/notebook_html.py), so the panels' static
  copies (SVG, embedded PNG) are the figures on the page. An executed notebook is kept in a cache keyed by the
  notebook and the package's sources, so a second build runs nothing. `BERTVIZ_LAB_DOCS_EXECUTE` picks what runs:
  `all` (the default), `none`, or notebook names separated by commas (`00_workbench`); a notebook not run shows its
  code and says so.
- `api/NAME.md` for each module of API_PAGES: mkdocstrings renders every name of the module's `__all__`.
- `<!-- yaml-keys -->` in a page becomes the table of the run config's keys (bertviz_lab.train.schema_table).
- `<!-- views -->` and `<!-- view-keys -->` become the tables of the views and of their keys
  (bertviz_lab.widgets.registry).
- `<!-- head-statistics -->` in a page becomes the table of the corpus head statistics, from their registry
  (bertviz_lab.kernels.head_statistics).
- `stylesheets/notebook.css`: JupyterLab's theme variables the static copies use, for Material's light and dark
  schemes (bertviz_lab.widgets.figures.theme).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import importlib
import inspect
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PACKAGE = ROOT / "bertviz_lab"
CACHE = Path(os.environ.get("BERTVIZ_LAB_CACHE", Path.home() / ".cache" / "bertviz_lab")) / "docs-notebooks"
EXECUTE_ENV = "BERTVIZ_LAB_DOCS_EXECUTE"
YAML_KEYS = "<!-- yaml-keys -->"
VIEWS, VIEW_KEYS = "<!-- views -->", "<!-- view-keys -->"
HEAD_STATISTICS = "<!-- head-statistics -->"
NOTEBOOK_CSS = "stylesheets/notebook.css"

# page -> (module, what the page says first); each renders every name of the module's __all__
API_PAGES = {
    "api/bertviz_lab.md": ("bertviz_lab", "The top-level package: the model classes, `load`, `load_default` and "
                                          "the device helpers, re-exported. A name that is also "
                                          "`bertviz_lab.model`'s links to its entry there."),
    "api/model.md": ("bertviz_lab.model", "BERT as a student would read it: config, layers, heads, tokenizer, "
                                          "weights and the factories."),
    "api/trace.md": ("bertviz_lab.trace", "Traces of a forward pass, hook points, attention statistics, ablation, "
                                          "saliency, the logit lens, activation patching and architecture "
                                          "diagrams."),
    "api/trace.saliency.md": ("bertviz_lab.trace.saliency", "Token saliency: integrated gradients and "
                                                            "gradient x input on the word embeddings."),
    "api/widgets.md": ("bertviz_lab.widgets", "The panels users compose, and the workbench."),
    "api/views.md": ("bertviz_lab.views", "bertviz-style views from any model's attentions."),
    "api/model.attention_statistics.md": ("bertviz_lab.model.attention_statistics", "The attention statistics a "
                                                                                    "corpus analysis asks a forward "
                                                                                    "for."),
    "api/views.neuron_view.md": ("bertviz_lab.views.neuron_view", "bertviz's one-line neuron view for a BERT-family "
                                                                  "model."),
    "api/corpus.md": ("bertviz_lab.corpus", "Corpus analysis: head statistics over many texts, nearest contexts, "
                                            "query-key maps."),
    "api/train.md": ("bertviz_lab.train", "Pretraining: data, the Trainer, checkpoints and the runner behind the "
                                          "CLI."),
    "api/kernels.md": ("bertviz_lab.kernels", "The fast paths behind one seam, and `status()`."),
}


# pages searched first: bertviz's function names (head_view, model_view) are also attributes of the panels
SEARCH_BOOST = {"bertviz_lab.views": 2}


# --------------------------------------------------------------------------------------------------------------
# the hooks


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages (notebooks, API reference) and the notebook stylesheet."""
    for notebook in project_notebooks(config):
        files.append(File.generated(config, f"notebooks/{notebook.stem}.md", content=notebook_page(notebook)))
    for page, (module, intro) in API_PAGES.items():
        if importable(module):
            files.append(File.generated(config, page, content=api_page(module, intro)))
    files.append(File.generated(config, NOTEBOOK_CSS, content=notebook_css()))
    return files


def on_config(config: Any) -> Any:
    """The nav's Notebooks section titles each listed notebook by its first heading; the notebook stylesheet on
    every page (notebook pages are the ones that use it)."""
    if NOTEBOOK_CSS not in config["extra_css"]:
        config["extra_css"].append(NOTEBOOK_CSS)
    notebooks = project_notebooks(config)
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and "Notebooks" in entry:
            entry["Notebooks"] = [{notebook_title(path): f"notebooks/{path.stem}.md"} for path in notebooks]
    return config


def project_notebooks(config: Any) -> list[Path]:
    """The notebooks the nav lists under Notebooks (as `notebooks/NAME.md`, or already titled by on_config), in
    its order; one that is listed but missing is an error naming it."""
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and "Notebooks" in entry:
            pages = [next(iter(item.values())) if isinstance(item, dict) else item for item in entry["Notebooks"]]
            notebooks = [NOTEBOOKS / f"{Path(page).stem}.ipynb" for page in pages]
            missing = [f"notebooks/{path.name}" for path in notebooks if not path.is_file()]
            if missing:
                raise ValueError(f"mkdocs.yml lists notebooks that do not exist: {', '.join(missing)}")
            return notebooks
    return []


def notebook_title(notebook: Path) -> str:
    """The notebook's first Markdown heading, else its file name."""
    for cell in json.loads(notebook.read_text(encoding="utf-8")).get("cells", []):
        if cell.get("cell_type") == "markdown":
            source = "".join(cell.get("source", []))
            heading = re.search(r"^#+\s+(.+?)\s*$", source, re.M)
            if heading:
                return heading.group(1).replace("`", "")
    return notebook.name


def head_statistics_table() -> str:
    """The corpus head statistics as a Markdown table (column, what it measures, unit, per query), in their order."""
    from bertviz_lab.kernels.head_statistics import STATISTICS

    lines = ["| column | measures | unit | per query i |", "|---|---|---|---|"]
    lines += [f"| `{s.name}` | {s.label} | {s.unit} | {s.description.replace('|', '&#124;')} |" for s in STATISTICS]
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """The run config's keys and the head statistics where a page asks for them."""
    if YAML_KEYS in markdown:
        from bertviz_lab.train.schema_table import markdown as keys_table

        markdown = markdown.replace(YAML_KEYS, keys_table())
    if VIEWS in markdown or VIEW_KEYS in markdown:
        from bertviz_lab.widgets import registry

        markdown = markdown.replace(VIEWS, registry.views_table()).replace(VIEW_KEYS, registry.keys_table())
    if HEAD_STATISTICS in markdown:
        markdown = markdown.replace(HEAD_STATISTICS, head_statistics_table())
    return markdown


def on_page_content(content: str, page: Any, config: Any, files: Files) -> str:
    """A notebook page's outputs, put in after Markdown so their HTML and SVG pass through untouched."""
    outputs = OUTPUTS.get(page.file.src_uri)
    if not outputs:
        return content
    return re.sub(r'<div class="bvl-output" data-output="(\d+)"></div>',
                  lambda match: f'<div class="bvl-output">{outputs[int(match.group(1))]}</div>', content)


# --------------------------------------------------------------------------------------------------------------
# API pages


def importable(module: str) -> bool:
    """Whether the module's source is there (corpus and views may land later than the rest)."""
    return importlib.util.find_spec(module) is not None


def api_page(module: str, intro: str) -> str:
    """A page rendering every name of `module.__all__` (read at build time, so a new export needs no edit). Names
    griffe reads in the source are rendered by mkdocstrings in one block; a name made at run time (the task classes
    and factories from model.tasks' registry) or shadowed by a submodule of the same name gets its own heading, with
    mkdocstrings on its defining object, or its signature and docstring where that object has no place in a source."""
    runtime = importlib.import_module(module)
    names = sorted(getattr(runtime, "__all__", []))
    static = static_members(module)
    elsewhere = reexported(module, names)
    read = [name for name in names if name in static and name not in elsewhere and not (
        static[name].is_module and not inspect.ismodule(getattr(runtime, name)))]
    boost = ["---", "search:", f"  boost: {SEARCH_BOOST[module]}", "---", ""] if module in SEARCH_BOOST else []
    lines = [*boost, f"# `{module}`", "", intro, "", f"::: {module}", "    options:",
             f"      members: {json.dumps(read)}", "      show_root_heading: false", "      show_root_toc_entry: false",
             ""]
    for name in names:
        if name in elsewhere:
            summary = (inspect.getdoc(getattr(runtime, name)) or "").split("\n\n")[0].replace("\n", " ")
            target = elsewhere[name].partition("#")[2]
            lines += [f"## `{name}` {{ #{module}.{name} }}", "", f"{summary} The same object as [`{target}`]"
                      f"({elsewhere[name]}).", ""]
        elif name not in read:
            lines += runtime_entry(module, name, getattr(runtime, name))
    return "\n".join(lines) + "\n"


def reexported(module: str, names: list[str]) -> dict[str, str]:
    """Names of `module` that are the same objects as those of a module with its own page: name -> that page."""
    found = {}
    for page, (other, _) in API_PAGES.items():
        if other == module or not other.startswith(f"{module}.") or not importable(other):
            continue
        source = importlib.import_module(other)
        for name in names:
            if name in getattr(source, "__all__", ()) and getattr(source, name) is getattr(
                    importlib.import_module(module), name):
                found.setdefault(name, f"{page.removeprefix('api/')}#{other}.{name}")
    return found


@functools.cache
def static_package() -> Any:
    """The package as griffe reads it in the source, read once per build: loading a submodule reads the whole package
    again (~2 s each), and the API pages ask for a dozen modules."""
    import griffe

    return griffe.load(PACKAGE.name, search_paths=[str(ROOT)], resolve_aliases=False)


@functools.cache
def static_members(module: str) -> dict[str, Any]:
    """The members griffe reads in `module`'s source, by name."""
    loaded = static_package()
    for part in module.split(".")[1:]:
        loaded = loaded.members[part]
    return dict(loaded.members)


def runtime_entry(module: str, name: str, value: Any) -> list[str]:
    """A heading `module.name`, then the object where it is defined, or its signature and docstring."""
    heading = [f"## `{name}` {{ #{module}.{name} }}", ""]
    home, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", "")
    where = f"{home}.{qualname}"
    if (inspect.isclass(value) or inspect.isfunction(value)) and home and qualname in static_members(home):
        return heading + [f"::: {where}", "    options:", "      show_root_heading: false",
                          "      show_root_toc_entry: false", ""]
    try:
        signature = str(inspect.signature(value))
    except (TypeError, ValueError):
        signature = ""
    described = inspect.getdoc(value) or ""
    return heading + ["```python", f"{name}{signature}", "```", "", described, ""]


# --------------------------------------------------------------------------------------------------------------
# notebook pages

OUTPUTS: dict[str, list[str]] = {}  # page -> the HTML of each output, by placeholder number
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def to_execute(name: str) -> bool:
    """Whether the notebook `name` runs in this build (BERTVIZ_LAB_DOCS_EXECUTE)."""
    wanted = os.environ.get(EXECUTE_ENV, "all").strip()
    if wanted == "all":
        return True
    return name in {part.strip() for part in wanted.split(",")}


def sources_key(notebook: Path) -> str:
    """What an executed notebook depends on: its own bytes, the package's sources and the shipped configs, and
    whether Graphviz's `dot` is there (without it the architecture panels show their mermaid source instead)."""
    digest = hashlib.sha256(notebook.read_bytes())
    digest.update(b"dot" if shutil.which("dot") else b"no dot")
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and path.suffix in {".py", ".js", ".css", ".yaml", ".c", ".j2", ".json", ".txt"}:
            digest.update(str(path.relative_to(PACKAGE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


def executed(notebook: Path) -> Any:
    """The notebook run top to bottom (from the cache when nothing it depends on changed), outputs sanitised."""
    import nbformat

    from bertviz_lab.widgets.notebook_html import clean_outputs, read_notebook, run_notebook

    cached = CACHE / f"{notebook.stem}-{sources_key(notebook)}.ipynb"
    if cached.is_file():
        node = nbformat.reads(cached.read_text(encoding="utf-8"), as_version=4)
    else:
        node = read_notebook(notebook)
        with tempfile.TemporaryDirectory(prefix="bertviz-docs-") as folder:  # notebooks may write beside themselves
            copy = Path(folder) / "notebooks" / notebook.name
            copy.parent.mkdir()
            shutil.copy(notebook, copy)
            shutil.copytree(ROOT / "configs", Path(folder) / "configs")
            run_notebook(node, copy, timeout=600)
        CACHE.mkdir(parents=True, exist_ok=True)
        for old in CACHE.glob(f"{notebook.stem}-*.ipynb"):
            old.unlink()
        cached.write_text(nbformat.writes(node), encoding="utf-8")
    clean_outputs(node, trust=False)
    return node


def notebook_page(notebook: Path) -> str:
    """The notebook as Markdown: markdown cells as they are, code in fences, outputs as placeholders."""
    from bertviz_lab.widgets.notebook_html import clean_outputs, read_notebook

    run = to_execute(notebook.stem)
    if run:
        node = executed(notebook)
    else:
        node = read_notebook(notebook)
        clean_outputs(node, trust=False)
    outputs: list[str] = []
    OUTPUTS[f"notebooks/{notebook.stem}.md"] = outputs
    parts = [] if run else [
        f'!!! note "Outputs left out"\n    This build ran without `{notebook.name}` ({EXECUTE_ENV}); `mkdocs build` '
        "runs every notebook and shows its figures here.\n"]
    for cell in node.cells:
        if cell.cell_type == "markdown":
            parts.append(cell.source)
        elif cell.cell_type == "code":
            parts.append(f"```python\n{cell.source}\n```")
            for output in cell.get("outputs", []):
                shown = output_html(output)
                if shown:
                    outputs.append(shown)
                    parts.append(f'<div class="bvl-output" data-output="{len(outputs) - 1}"></div>')
    return "\n\n".join(parts) + "\n"


def text_block(text: str) -> str:
    """Plain text as the page shows it: escaped, in a pre block."""
    return f'<pre class="bvl-text">{html.escape(ANSI.sub("", text))}</pre>'


def output_html(output: Any) -> str:
    """One output as HTML, the richest form first (already sanitised by clean_outputs)."""
    kind = output.get("output_type")
    if kind == "stream":
        return text_block(output.get("text", ""))
    if kind == "error":
        return text_block("\n".join(output.get("traceback", [])))
    data = output.get("data", {})
    if "text/html" in data:
        return data["text/html"]
    if "image/svg+xml" in data:
        return data["image/svg+xml"]
    for mime in ("image/png", "image/jpeg"):
        if mime in data:
            encoded = data[mime] if isinstance(data[mime], str) else base64.b64encode(data[mime]).decode()
            return f'<img alt="a figure the notebook drew" src="data:{mime};base64,{encoded.strip()}">'
    if "text/vnd.mermaid" in data:
        return text_block(html.unescape(data["text/vnd.mermaid"]))
    if "text/markdown" in data:
        return text_block(data["text/markdown"])
    if "text/plain" in data:
        return text_block(data["text/plain"])
    return ""


def notebook_css() -> str:
    """JupyterLab's theme variables, as the exports resolve them, for Material's light (default) and dark (slate)."""
    from bertviz_lab.widgets.figures.theme import THEMES

    def block(selector: str, theme: str) -> str:
        values = "".join(f"  {name}: {value};\n" for name, value in THEMES[theme].items())
        return f"{selector} {{\n{values}}}\n"

    return ("/* The panels' static copies draw with JupyterLab's variables; here they take the site's scheme. */\n"
            + block('[data-md-color-scheme="default"] .bvl-output', "light")
            + block('[data-md-color-scheme="slate"] .bvl-output', "dark")
            + ".bvl-output { margin: 0 0 1em; overflow-x: auto; }\n"
            + ".bvl-output pre.bvl-text { font-size: 0.75em; padding: 0.5em; max-height: 30em; overflow: auto; }\n")
