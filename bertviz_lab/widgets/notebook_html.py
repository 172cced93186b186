"""A notebook as one offline HTML page that runs nothing and fetches nothing, so it is safe to open and to pass on.

The page is nbconvert's lab page without the scripts it would fetch from public CDNs (require.js, MathJax, mermaid, the
widget renderer); the panels' static copies are plain HTML and SVG and show without them (markdown maths shows as TeX
source). A notebook received from someone else may carry active content, so by default the page is sanitised:
scripts, application/javascript outputs, on* event handlers, javascript:/vbscript:/data:text/html links, iframes,
objects, embeds, meta refresh, forms (their fields stay) and SVG foreignObject are removed; images, style sheets and
CSS url()/@import that would load from the network are dropped (an image or frame leaves a note such as "remote image
removed: host"); only inline data: images and files in the page's own folder load, and a Content-Security-Policy in
the page blocks the rest. --trust keeps every output as it is (its scripts run when the page is opened): only for
notebooks you trust.

The page is never written over the notebook itself, nor over an existing file that is not an earlier page of this
command, unless --force (a page carries <meta name="generator" content="bertviz-lab html">), nor through a symbolic
link (--force replaces the link itself). --execute runs the notebook's code on this machine first. A notebook over
MAX_NOTEBOOK_BYTES is refused; an output too big to sanitise (MAX_SANITISED_CHARS) is left out with a note.

    bertviz-lab html NOTEBOOK.ipynb [--execute] [--output PAGE.html] [--trust] [--force]
"""

from __future__ import annotations

import argparse
import html
import json
import logging
import os
import re
import stat
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import nbformat
from jinja2 import pass_context
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from nbconvert import HTMLExporter
from nbconvert.preprocessors import ExecutePreprocessor
from nbformat.corpus.words import generate_corpus_id
from nbformat.v4 import output_from_msg
from nbformat.validator import get_validator

from bertviz_lab.util.files import clip, first_line, json_kind, kind, named, present, shown, write_atomically
from bertviz_lab.widgets.page_sanitizer import sanitize_html, sanitize_svg

TEMPLATES = Path(__file__).with_name("templates")
MAX_NOTEBOOK_BYTES = 100_000_000  # a larger notebook is refused (one of 53 MB of images peaks at 0.8 GB)
MAX_SANITISED_CHARS = 4_000_000  # an HTML/SVG output or raw cell sanitised whole (~2 s, ~50 MB); larger: a note
TEMPLATE = "bertviz_offline"
GENERATOR_META = '<meta name="generator" content="bertviz-lab html">'
# What the sanitised page may load at all, should anything have slipped through: inline images and fonts, files
# beside the page, inline styles; no script, frame, form target or base URL.
PAGE_POLICY = ("default-src 'none'; img-src 'self' data:; media-src 'self' data:; style-src 'unsafe-inline'; "
               "font-src data:; form-action 'none'; base-uri 'none'")
POLICY_META = f'<meta http-equiv="Content-Security-Policy" content="{PAGE_POLICY}">'
SCRIPT_MIME = re.compile(r"(?:application|text)/(?:x-)?(?:java|ecma)script", re.I)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CELL_TYPES = ("code", "markdown", "raw")
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
MARK_BYTES = 4096  # an earlier page names its generator in this many first bytes
QUIET_LOG = logging.getLogger(__name__)  # nbconvert's warnings are not the command's business: errors only
QUIET_LOG.setLevel(logging.ERROR)


def notebook_to_html(notebook: str | Path, output: str | Path | None = None, execute: bool = False,
                     timeout: int = 600, trust: bool = False, force: bool = False) -> Path:
    """Write `notebook` as an offline page (beside it, same name, unless `output`) and return its path; `execute`
    runs it first, `trust` keeps its outputs unsanitised, `force` may replace a file that is not an earlier page."""
    notebook = notebook_file(Path(notebook))
    target = page_path(notebook, output, force)
    try:
        node = read_notebook(notebook)
        if execute:
            run_notebook(node, notebook, timeout)
        clean_outputs(node, trust)
        page = export_page(node, notebook.stem, trust)
    except RecursionError:  # JSON nested just below the parser's limit, deeper than nbformat or nbconvert walk
        raise ValueError(f"{named(notebook)} nests its content too deeply to convert") from None
    write_atomically(target if target.is_symlink() else target.resolve(), page)  # a link (--force): replaced itself
    return target


# ------------------------------------------------------------------------------------------------------------
# Reading


def notebook_file(path: Path) -> Path:
    """`path` when it is a regular file (or a link to one); FileNotFoundError or ValueError naming it otherwise."""
    if not present(path) or not path.exists():
        raise FileNotFoundError(f"no notebook at {named(path)}")
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        raise ValueError(f"{named(path)} is {kind(mode)}, not a notebook file")
    return path


def read_notebook(path: Path) -> Any:
    """The notebook at `path` as an nbformat v4 node; ValueError/FileNotFoundError naming the file and the problem."""
    name = named(notebook_file(path))
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"{name} is {size / 1e6:.0f} MB; a page is made of notebooks of up to "
                         f"{MAX_NOTEBOOK_BYTES / 1e6:g} MB (clear its largest outputs first)")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"{name} is not UTF-8 text (byte 0x{raw[error.start]:02x} at offset {error.start}); "
                         f"a notebook is JSON in UTF-8") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"{name} nests its JSON too deeply to read") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{name} is not JSON: {error.msg} at line {error.lineno}, column {error.colno}") from None
    except ValueError as error:  # e.g. an integer too long to convert
        raise ValueError(f"{name} is not JSON that can be read: {first_line(error)}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{name} holds a JSON {json_kind(data)}, not a notebook (a JSON object with cells)")
    version = data.get("nbformat")
    if version == 3:
        try:
            data = json.loads(json.dumps(nbformat.convert(nbformat.v3.to_notebook_json(data), 4)))
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise ValueError(f"{name} is not a valid nbformat 3 notebook ({first_line(error)})") from None
    elif version is None:
        raise ValueError(f"{name} has no nbformat version, so it is not a notebook (nbformat 4 expected)")
    elif version != 4:
        raise ValueError(f"{name} has nbformat {shown(version)}; this reads nbformat 4 (and 3)")
    with_ids(data)
    problem = notebook_problem(data)
    if problem:
        raise ValueError(f"{name} is not a valid notebook: {clip(problem)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbformat.v4.to_notebook_json(data)


def with_ids(data: dict[str, Any]) -> None:
    """Give every cell of an nbformat 4.5+ notebook an id where it has none, as nbformat and JupyterLab do when they
    open one (JupyterLab with a warning): such a notebook is common and otherwise whole."""
    cells, minor = data.get("cells"), data.get("nbformat_minor")
    if not isinstance(cells, list) or not isinstance(minor, int) or minor < 5:
        return
    for cell in cells:
        if isinstance(cell, dict) and "id" not in cell:
            cell["id"] = generate_corpus_id()


def notebook_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with an nbformat 4 notebook, in one phrase (the parts the page reads first), or None."""
    minor = data.get("nbformat_minor")
    if not isinstance(minor, int) or isinstance(minor, bool) or minor < 0:
        return f"nbformat_minor is {shown(minor)}; expected a whole number"
    cells = data.get("cells")
    if not isinstance(cells, list):
        return f"cells is {shown(cells)}; expected a list of cells"
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            return f"cells[{index}] is {shown(cell)}; expected a JSON object"
        if cell.get("cell_type") not in CELL_TYPES:
            return f"cells[{index}].cell_type is {shown(cell.get('cell_type'))}; expected 'code', 'markdown' or 'raw'"
        outputs = cell.get("outputs", [])
        if not isinstance(outputs, list):
            return f"cells[{index}].outputs is {shown(outputs)}; expected a list"
        for number, out in enumerate(outputs):
            if not isinstance(out, dict) or out.get("output_type") not in OUTPUT_TYPES:
                return (f"cells[{index}].outputs[{number}] is not an output (output_type one of "
                        f"{', '.join(OUTPUT_TYPES)})")
    validator = get_validator(version=4, version_minor=min(minor, 5))
    for error in validator.iter_errors(data):  # fastjsonschema calls the notebook "data"
        message = str(error.message)
        return message[5:] if message.startswith("data.") else re.sub(r"^data\b", "the notebook", message)
    return None


# ------------------------------------------------------------------------------------------------------------
# Where the page goes


def page_path(notebook: Path, output: str | Path | None, force: bool = False) -> Path:
    """Where the page goes: `output`, or the notebook's name with .html. Never the notebook itself (also through a
    link), a folder or a device; an existing file only when it is an earlier page, or with `force`."""
    if output is None:
        if notebook.suffix.lower() != ".ipynb":
            raise ValueError(f"{named(notebook)} is not a .ipynb file, so the page has no default name: give one "
                             f"with --output")
        output = notebook.with_suffix(".html")
    target = Path(output)
    name = named(target)
    if target.is_symlink():  # a page is never written through a link, which may lead anywhere (dangling or not)
        if not force:
            raise ValueError(f"{name} is a symbolic link (to {named(os.readlink(target))}); the page is not written "
                             f"through it: pass --force to replace the link itself with the page, or name another "
                             f"page with --output")
        return target
    if present(target) and target.exists():
        if os.path.samefile(target, notebook):
            raise ValueError(f"{name} is the notebook itself; name another page with --output (--force does not "
                             f"change this)")
        mode = target.stat().st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{name} is {kind(mode)}; --output names the page file to write")
        if not force and not is_earlier_page(target):
            raise ValueError(f"{name} exists and is not a page written by bertviz-lab html; pass --force to replace "
                             f"it, or name another page with --output")
    elif not target.resolve().parent.is_dir():
        raise FileNotFoundError(f"the folder of {name} does not exist")
    return target


def is_earlier_page(path: Path) -> bool:
    """Whether `path` is a page this command wrote (its head names the generator)."""
    with open(path, "rb") as file:
        return GENERATOR_META.encode() in file.read(MARK_BYTES)


# ------------------------------------------------------------------------------------------------------------
# Running


class CellTracking(ExecutePreprocessor):
    """nbconvert's executor that remembers which cell it runs, so an error can name it, and keeps each cell's
    outputs as they were when it ran.

    A figure shown by one cell and changed by a later one (`panel.view.value = "head view"`) would, in nbclient,
    change the earlier cell's output: a page would then show the last state under the first cell and nothing under
    the cells that made it. Here the earlier output stays as its cell left it, and the changing cell gets the new
    figure as an output of its own, so the page reads in the notebook's order.
    """

    cell_index = -1

    def preprocess_cell(self, cell, resources, index):
        self.cell_index = index
        return super().preprocess_cell(cell, resources, index)

    def setup_kernel(self, **kwargs):
        """The kernel's own stderr (start-up warnings) stays off the command's one line of error."""
        return super().setup_kernel(stderr=subprocess.DEVNULL, **kwargs)

    def _update_display_id(self, display_id: str, msg: dict[str, Any]) -> None:
        shown_in = self._display_id_map.get(display_id, {})
        earlier = [cell for cell in shown_in if cell != self.cell_index]
        if msg["header"]["msg_type"] != "update_display_data" or not earlier or self.cell_index < 0:
            return super()._update_display_id(display_id, msg)  # a new display, or a change in the cell showing it
        msg["header"]["msg_type"] = "display_data"
        out = output_from_msg(msg)
        outputs = self.nb["cells"][self.cell_index]["outputs"]
        if self.cell_index not in shown_in:  # this cell's first change of the figure: an output of its own
            shown_in[self.cell_index] = [len(outputs)]
            outputs.append(out)
        for index in shown_in[self.cell_index]:
            outputs[index]["data"], outputs[index]["metadata"] = out["data"], out["metadata"]
        return None


def run_notebook(node: Any, path: Path, timeout: int) -> None:
    """Execute the notebook in its folder; a failing cell, a missing kernel or a dead one is a ValueError."""
    name = named(path)
    runner = CellTracking(timeout=timeout)
    try:
        runner.preprocess(node, {"metadata": {"path": str(path.parent)}})
    except NoSuchKernel as error:
        installed = ", ".join(sorted(KernelSpecManager().find_kernel_specs())) or "none"
        raise ValueError(f"{name} asks for the kernel {shown(error.name)}, which is not installed here "
                         f"(installed: {clip(installed)})") from None
    except CellExecutionError as error:
        raise ValueError(f"{name}: cell {runner.cell_index} failed: {error.ename}: "
                         f"{clip(' '.join(str(error.evalue).split()))}") from None
    except CellTimeoutError:
        raise ValueError(f"{name}: cell {runner.cell_index} ran longer than {timeout} s") from None
    except DeadKernelError:
        raise ValueError(f"{name}: the kernel died while running cell {runner.cell_index}") from None
    except RuntimeError as error:  # the kernel did not start or answer
        raise ValueError(f"{name}: the kernel failed: {clip(' '.join(str(error).split()))}") from None


# ------------------------------------------------------------------------------------------------------------
# The page


def left_out(what: str, characters: int) -> str:
    """The note a page shows where an output too big to sanitise was."""
    return (f'<p class="bvl-left-out"><b>{what} of {characters / 1e6:.1f} million characters left out</b>: the page '
            f"sanitises at most {MAX_SANITISED_CHARS / 1e6:g} million per output (bertviz-lab html --trust keeps it "
            f"whole, unsanitised).</p>")


def sanitised_or_note(markup: str, what: str, sanitise: Callable[[str], str]) -> str:
    return sanitise(markup) if len(markup) <= MAX_SANITISED_CHARS else left_out(what, len(markup))


def clean_outputs(node: Any, trust: bool) -> None:
    """Outputs as the page shows them: a widget view goes with its text/plain fallback (no widget renders offline;
    the static copy before it shows the figure); unless `trust`, scripts go and HTML, SVG and raw cells are
    sanitised, and one of more than MAX_SANITISED_CHARS characters is left out with a note saying so."""
    for cell in node.cells:
        if cell.cell_type == "raw" and not trust:
            cell.source = sanitised_or_note(cell.source, "a raw cell", sanitize_html)
        if "outputs" not in cell:
            continue
        cell.outputs = [output for output in cell.outputs if not widget_view_only(output)]
        for output in cell.outputs:
            data = output.get("data")
            if not isinstance(data, dict):
                continue
            if WIDGET_VIEW in data:
                del data[WIDGET_VIEW]
                data.pop("text/plain", None)
            if trust:
                continue
            for mime in [mime for mime in data if SCRIPT_MIME.fullmatch(mime)]:
                del data[mime]
            if isinstance(data.get("text/html"), str):
                data["text/html"] = sanitised_or_note(data["text/html"], "an HTML output", sanitize_html)
            svg = data.get("image/svg+xml")
            if isinstance(svg, str) and len(svg) > MAX_SANITISED_CHARS:  # the note in HTML, which the page prefers
                del data["image/svg+xml"]
                data.setdefault("text/html", left_out("an SVG output", len(svg)))
            elif isinstance(svg, str):
                data["image/svg+xml"] = sanitize_svg(svg)
            if isinstance(data.get("text/vnd.mermaid"), str):  # the template writes it unescaped; no mermaid here
                data["text/vnd.mermaid"] = html.escape(data["text/vnd.mermaid"])


class OfflinePageExporter(HTMLExporter):
    """nbconvert's HTML exporter whose markdown (cells and text/markdown outputs) is sanitised unless `trust`."""

    def __init__(self, trust: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.trust = trust
        self.log = QUIET_LOG  # "Alternative text is missing": it adds that text itself

    @pass_context
    def markdown2html(self, context, source):
        markup = super().markdown2html(context, source)
        return markup if self.trust else sanitize_html(markup)


def widget_view_only(output: Any) -> bool:
    """Whether an output is a widget view with nothing else than its text/plain fallback."""
    data = output.get("data")
    return isinstance(data, dict) and WIDGET_VIEW in data and set(data) <= {WIDGET_VIEW, "text/plain"}


def export_page(node: Any, title: str, trust: bool) -> str:
    """The page's HTML: the template, markdown sanitised unless `trust`, then the whole page checked again; marked
    with the generator (and, sanitised, the content policy) first thing in its head."""
    exporter = OfflinePageExporter(template_name=TEMPLATE, extra_template_basedirs=[str(TEMPLATES)], trust=trust)
    with warnings.catch_warnings():  # "mimetype(s) ... not able to be represented": such outputs are left out
        warnings.simplefilter("ignore", UserWarning)
        page, _ = exporter.from_notebook_node(node, resources={"metadata": {"name": title}})
    marks = GENERATOR_META if trust else f"{GENERATOR_META}\n{POLICY_META}"
    if not trust:
        page = sanitize_html(page, page=True)
    marked, found = re.subn(r"<head\b[^>]*>", lambda match: f"{match.group(0)}\n{marks}", page, count=1)
    if not found:
        raise ValueError("the page template wrote no <head>")
    return marked


def main(argv: list[str] | None = None) -> int:
    """`bertviz-lab html`: one line naming the page written, or the error (exit 2)."""
    parser = argparse.ArgumentParser(prog="bertviz-lab html", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", help="the .ipynb file")
    parser.add_argument("--execute", action="store_true", help="run the notebook first (its code runs here)")
    parser.add_argument("--output", help="the page to write (default: the notebook's name with .html)")
    parser.add_argument("--trust", action="store_true",
                        help="keep every output as it is: its scripts run and its remote images load when the page "
                             "is opened; only for notebooks you trust")
    parser.add_argument("--force", action="store_true",
                        help="replace --output even when it is an existing file that is not an earlier page")
    args = parser.parse_args(argv)
    try:
        page = notebook_to_html(args.notebook, args.output, args.execute, trust=args.trust, force=args.force)
    except (OSError, ValueError) as error:
        print(f"bertviz-lab html: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    print(page)
    return 0
