"""`bertviz-lab html`: a notebook as one offline page that keeps its static copies, runs none of the notebook's own
scripts and loads nothing from the network (unless --trust), never writes over the notebook or a file that is not
an earlier page (unless --force), and answers a malformed notebook, a failing cell or a missing kernel in one line."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
import torch
from html_dom import document_dom
from nbconvert import HTMLExporter

from bertviz_lab.cli import main
from bertviz_lab.widgets import AttentionPanel, DevicePicker
from bertviz_lab.widgets.notebook_html import (
    GENERATOR_META,
    POLICY_META,
    notebook_to_html,
    read_notebook,
    run_notebook,
)

WIDGET_VIEW = {"application/vnd.jupyter.widget-view+json": {"model_id": "0" * 32, "version_major": 2,
                                                            "version_minor": 0}, "text/plain": "DevicePicker(...)"}


def write_notebook(path: Path, cells: list, **metadata) -> Path:
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata.update(metadata)
    nbformat.write(notebook, path)
    return path


def shown(data: dict) -> nbformat.NotebookNode:
    """A code cell that displayed `data` (one mimebundle)."""
    return nbformat.v4.new_code_cell("x", execution_count=1, outputs=[nbformat.v4.new_output("display_data",
                                                                                              data=data)])


@pytest.fixture
def saved_notebook(tmp_path):
    """A notebook as JupyterLab saves it after a panel was shown: the static copy, then the widget view."""
    copy = DevicePicker(torch.nn.Linear(2, 2)).static_copy.bundle()
    cell = nbformat.v4.new_code_cell("DevicePicker(model)", execution_count=1, outputs=[
        nbformat.v4.new_output("display_data", data=copy), nbformat.v4.new_output("display_data", data=WIDGET_VIEW)])
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Devices\n\n$x^2$"), cell])
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2,
                                                                                  "version_minor": 0}}
    path = tmp_path / "devices.ipynb"
    nbformat.write(notebook, path)
    return path


def test_the_page_keeps_the_static_copy_and_fetches_no_script(saved_notebook):
    page = notebook_to_html(saved_notebook).read_text(encoding="utf-8")
    assert 'data-bvl-static="' in page and "bvl-devices" in page and "model on cpu" in page
    assert re.findall(r"<script", page, re.I) == []
    assert re.findall(r"<(?:link|img|iframe)[^>]+(?:href|src)=\"https?://", page) == []  # nor a style sheet or image
    assert "DevicePicker(...)" not in page, "the widget view's text/plain fallback is left out"
    nbconvert_page, _ = HTMLExporter(template_name="lab").from_filename(str(saved_notebook))
    assert re.findall(r"<script[^>]*\bsrc=\"https?://", nbconvert_page)  # what the plain template would fetch
    assert "DevicePicker(...)" in nbconvert_page


def test_the_command_names_the_page_or_the_error(saved_notebook, tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["html", str(saved_notebook), "--output", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out) and out.stat().st_size > 1000
    assert main(["html", str(tmp_path / "missing.ipynb")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "no notebook at" in error and "missing.ipynb" in error


# ---------------------------------------------------------------------------------------------------------------
# What a received notebook may carry: each kind is gone from the page, or neutralised.

HOSTILE_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
               'viewBox="0 0 10 10" onload="window.__pwned=\'svg onload\'"><script>window.__pwned=\'svg\'</script>'
               '<foreignObject><div>html inside</div></foreignObject><image xlink:href="https://evil.example/s.png"/>'
               '<rect width="10" height="10" fill="#c33"/></svg>')
# (id, cell, text that must not be in the page, text that must be)
HOSTILE = [
    ("html script", shown({"text/html": "<b>kept</b><script>window.__pwned='html'</script>"}), "__pwned", "kept"),
    ("html onerror", shown({"text/html": '<img src="x.png" onerror="window.__pwned=1">'}), "onerror", 'src="x.png"'),
    ("application/javascript", shown({"application/javascript": "window.__pwned='js'", "text/plain": "JS"}),
     "__pwned", ""),
    ("markdown raw script", nbformat.v4.new_markdown_cell("kept <script>window.__pwned=1</script>"), "__pwned",
     "kept"),
    ("markdown raw img", nbformat.v4.new_markdown_cell('kept <img src="x.png" onerror="window.__pwned=2">'),
     "onerror", '<img alt="No description has been provided for this image" src="x.png">'),
    ("markdown javascript link", nbformat.v4.new_markdown_cell("[click](javascript:window.__pwned=1)"),
     "javascript:", "click"),
    ("html javascript link", shown({"text/html": '<a href="javascript:window.__pwned=1">click</a>'}), "javascript:",
     "click"),
    ("remote image", shown({"text/html": '<img src="https://evil.example/track.png">'}), "evil.example/track",
     "remote image removed: evil.example"),
    ("markdown remote image", nbformat.v4.new_markdown_cell("![tracker](https://evil.example/md.png)"),
     "evil.example/md", "remote image removed: evil.example"),
    ("remote style sheet", shown({"text/html": '<link rel="stylesheet" href="https://cdn.evil.example/s.css">'}),
     "cdn.evil.example/s", "remote style sheet removed: cdn.evil.example"),
    ("iframe", shown({"text/html": '<iframe src="https://evil.example/frame"></iframe>'}), "<iframe",
     "embedded content removed: evil.example"),
    ("css url", shown({"text/html": '<div style="background: url(https://evil.example/bg.png)">x</div>'}),
     "evil.example", ""),
    ("css import", shown({"text/html": "<style>@import url(https://evil.example/i.css);</style>"}), "evil.example",
     ""),
    ("meta refresh", shown({"text/html": '<meta http-equiv="refresh" content="0; url=https://evil.example/">'}),
     'http-equiv="refresh"', ""),
    ("form action", shown({"text/html": '<form action="https://evil.example/steal"><input name="q"></form>'}),
     "evil.example", '<input name="q"'),
    ("text/markdown output", shown({"text/markdown": "md <script>window.__pwned=1</script>"}), "__pwned", "md"),
    ("raw html cell", nbformat.v4.new_raw_cell("<script>window.__pwned=1</script>raw",
                                               metadata={"raw_mimetype": "text/html"}), "__pwned", "raw"),
    ("mermaid breaking out of its pre", shown({"text/vnd.mermaid": "graph TD; A-->B</pre><script>window.__pwned=1"
                                                                   "</script>"}), "<script", "A--&gt;B"),
    ("png breaking out of its src", shown({"image/png": 'AAAA" onerror="window.__pwned=1'}),
     'onerror="window.__pwned=1"', "AAAA"),
    ("png file name pointing away", nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
        "display_data", data={"image/png": "AAAA"}, metadata={"filenames": {"image/png": "https://evil.example/f.png"}})]),
     "evil.example/f", "remote image removed"),
]


class Attributes(HTMLParser):
    """Every element's name and attributes, as a browser reads a plainly written page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        self.found += [(tag, name, value or "") for name, value in attrs] or [(tag, "", "")]


def assert_inert_page(page: str) -> None:
    """No script at all, no handler, nothing loaded from the network; the content policy and the mark in the head."""
    assert not re.search(r"<script", page, re.I)
    reader = Attributes()
    reader.feed(page)
    for tag, name, value in reader.found:
        assert not name.startswith("on"), (tag, name, value)
        if name in ("src", "href", "xlink:href", "poster", "srcset", "action") and tag != "a":
            assert not re.match(r"\s*(https?:)?//", value), (tag, name, value)
        assert not value.lower().lstrip().startswith("javascript:"), (tag, name, value)
    head = page[:page.index("<title>")]
    assert GENERATOR_META in head and POLICY_META in head


@pytest.mark.parametrize("cell, gone, kept", [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_a_received_notebook_makes_a_page_that_runs_and_fetches_nothing(tmp_path, cell, gone, kept):
    notebook = write_notebook(tmp_path / "received.ipynb", [nbformat.v4.new_markdown_cell("# Received"), cell])
    page = notebook_to_html(notebook).read_text(encoding="utf-8")
    assert gone not in page and kept in page
    assert "Received" in page
    assert_inert_page(page)


def test_svg_outputs_lose_scripts_handlers_foreign_objects_and_external_images(tmp_path):
    notebook = write_notebook(tmp_path / "svg.ipynb", [shown({"image/svg+xml": HOSTILE_SVG})])
    page = notebook_to_html(notebook).read_text(encoding="utf-8")
    encoded = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', page).group(1)
    svg = base64.b64decode(encoded).decode("utf-8")
    assert "<rect" in svg and 'viewBox="0 0 10 10"' in svg
    for gone in ("__pwned", "onload", "foreignObject", "evil.example"):
        assert gone not in svg


def test_the_title_from_the_notebooks_metadata_cannot_open_a_script(tmp_path):
    notebook = write_notebook(tmp_path / "titled.ipynb", [nbformat.v4.new_markdown_cell("x")],
                              title="</title><script>window.__pwned=1</script>")
    assert_inert_page(notebook_to_html(notebook).read_text(encoding="utf-8"))


def test_trust_keeps_every_output_as_it_is(tmp_path, capsys):
    cells = [case[1] for case in HOSTILE if case[0] in ("html script", "html onerror", "application/javascript",
                                                        "remote image", "markdown javascript link")]
    notebook = write_notebook(tmp_path / "trusted.ipynb", cells)
    assert main(["html", str(notebook), "--trust"]) == 0
    page = notebook.with_suffix(".html").read_text(encoding="utf-8")
    assert "<script>window.__pwned='html'</script>" in page and "window.__pwned='js'" in page
    assert 'onerror="window.__pwned=1"' in page and 'src="https://evil.example/track.png"' in page
    assert 'href="javascript:window.__pwned=1"' in page
    assert GENERATOR_META in page and POLICY_META not in page
    assert capsys.readouterr().out.strip() == str(notebook.with_suffix(".html"))
    with pytest.raises(SystemExit) as exited:  # what `python -m bertviz_lab html --help` prints, in this process
        main(["html", "--help"])
    main_help = capsys.readouterr().out
    assert exited.value.code == 0 and "--trust" in main_help and "scripts run" in " ".join(main_help.split())


def test_static_copies_are_the_same_document_in_the_sanitised_page(tmp_path, pretraining_model, minilm_tokenizer):
    copies = [DevicePicker(torch.nn.Linear(2, 2)).static_copy.bundle(),
              AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text="The cat sat on the mat.")
              .static_copy.bundle(),
              AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text="The cat sat on the mat.",
                             view="model view").static_copy.bundle()]
    assert all("<style>" in copy["text/html"] for copy in copies)
    assert "data:image/png;base64," in copies[2]["text/html"] and "<svg" in copies[1]["text/html"]
    notebook = write_notebook(tmp_path / "copies.ipynb", [nbformat.v4.new_markdown_cell("# Copies\n\n| a |\n|---|\n"
                                                                                        "| [link](https://ex.org) |"),
                                                          *[shown(copy) for copy in copies]])
    sanitised = notebook_to_html(notebook, tmp_path / "sanitised.html").read_text(encoding="utf-8")
    trusted = notebook_to_html(notebook, tmp_path / "trusted.html", trust=True).read_text(encoding="utf-8")
    # nothing of the copies (nor the rest) changed: the same elements, attributes and text, as nh3 writes them
    assert document_dom(sanitised.replace(f"\n{POLICY_META}", "")) == document_dom(trusted)
    for copy in copies:
        static_id = re.search(r'data-bvl-static="([^"]+)"', copy["text/html"]).group(1)
        assert f'class="bvl-static" data-bvl-static="{static_id}"' in sanitised


# ---------------------------------------------------------------------------------------------------------------
# Where the page goes: never over the notebook, nor over a file that is not an earlier page, unless --force.


def refused(capsys, argv: list[str], *phrases: str) -> str:
    assert main(["html", *argv]) == 2
    captured = capsys.readouterr()
    error = captured.err.strip()
    assert captured.out == "" and error.count("\n") == 0 and error.startswith("bertviz-lab html: error: "), error
    for phrase in phrases:
        assert phrase in error, error
    return error


def test_the_page_is_never_written_over_its_notebook(saved_notebook, tmp_path, capsys, monkeypatch):
    before = saved_notebook.read_bytes()
    refused(capsys, [str(saved_notebook), "--output", str(saved_notebook)], str(saved_notebook), "notebook itself")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    refused(capsys, ["devices.ipynb", "--output", "sub/../devices.ipynb", "--force"], "notebook itself")
    (tmp_path / "link.html").symlink_to(saved_notebook)
    refused(capsys, [str(saved_notebook), "--output", "link.html"], "link.html", "is a symbolic link")
    assert main(["html", str(saved_notebook), "--output", "link.html", "--force"]) == 0  # the link itself replaced
    capsys.readouterr()
    assert not (tmp_path / "link.html").is_symlink() and GENERATOR_META in (tmp_path / "link.html").read_text()
    assert saved_notebook.read_bytes() == before


def test_a_page_is_never_written_through_a_link(saved_notebook, tmp_path, capsys):
    """A link, dangling or not, is refused without --force; with it the link itself becomes the page, and what it
    pointed at (or would have created) is untouched."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "kept.html").write_text("<p>mine</p>", encoding="utf-8")
    for name, target in (("dangling.html", elsewhere / "created.html"), ("existing.html", elsewhere / "kept.html")):
        link = tmp_path / name
        link.symlink_to(target)
        refused(capsys, [str(saved_notebook), "--output", str(link)], str(link), "is a symbolic link (to",
                "--force to replace the link itself")
        assert link.is_symlink()
        assert main(["html", str(saved_notebook), "--output", str(link), "--force"]) == 0
        assert capsys.readouterr().out.strip() == str(link)
        assert not link.is_symlink() and GENERATOR_META in link.read_text(encoding="utf-8")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["kept.html"]
    assert (elsewhere / "kept.html").read_text(encoding="utf-8") == "<p>mine</p>"


def test_a_notebook_of_format_4_5_without_cell_ids_is_read_as_jupyterlab_reads_it(tmp_path):
    data = json.loads(nbformat.writes(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Without ids"), nbformat.v4.new_code_cell("1 + 1")])))
    assert data["nbformat_minor"] >= 5
    for cell in data["cells"]:
        del cell["id"]
    notebook = tmp_path / "no_ids.ipynb"
    notebook.write_text(json.dumps(data), encoding="utf-8")
    assert "Without ids" in notebook_to_html(notebook).read_text(encoding="utf-8")
    assert "id" not in json.loads(notebook.read_text(encoding="utf-8"))["cells"][0]  # the notebook is left as it was


def test_an_input_that_is_not_ipynb_needs_an_explicit_output(saved_notebook, tmp_path, capsys):
    notes = tmp_path / "notes.html"
    notes.write_text("<p>my notes</p>", encoding="utf-8")
    refused(capsys, [str(notes)], str(notes), "not a .ipynb file", "--output")
    assert notes.read_text(encoding="utf-8") == "<p>my notes</p>"
    renamed = tmp_path / "notebook.json"
    renamed.write_bytes(saved_notebook.read_bytes())  # a notebook under another name
    refused(capsys, [str(renamed)], str(renamed), "not a .ipynb file")
    assert main(["html", str(renamed), "--output", str(tmp_path / "notes-page.html")]) == 0


def test_only_an_earlier_page_is_replaced_without_force(saved_notebook, tmp_path, capsys):
    page = saved_notebook.with_suffix(".html")
    page.write_text("<p>my own page</p>", encoding="utf-8")
    refused(capsys, [str(saved_notebook)], str(page), "not a page written by bertviz-lab html", "--force")
    assert page.read_text(encoding="utf-8") == "<p>my own page</p>"
    assert main(["html", str(saved_notebook), "--force"]) == 0
    assert GENERATOR_META in page.read_text(encoding="utf-8")[:4096]
    page.write_text(page.read_text(encoding="utf-8").replace("model on cpu", "older page"), encoding="utf-8")
    assert main(["html", str(saved_notebook)]) == 0  # an earlier page of ours: replaced
    assert "model on cpu" in page.read_text(encoding="utf-8")
    capsys.readouterr()


def test_a_folder_or_a_missing_folder_is_no_page(saved_notebook, tmp_path, capsys):
    refused(capsys, [str(saved_notebook), "--output", str(tmp_path), "--force"], str(tmp_path), "a folder")
    refused(capsys, [str(saved_notebook), "--output", str(tmp_path / "nowhere" / "p.html")], "does not exist")
    assert not (tmp_path / "nowhere").exists()


# ---------------------------------------------------------------------------------------------------------------
# Malformed notebooks: exit 2 and one line naming the file and the problem; the API raises the same sentence.

VALID = json.loads(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])))
CELL = VALID["cells"][0]
MALFORMED = {
    "a JSON list": ("[1, 2]", "holds a JSON list, not a notebook"),
    "cells a number": (json.dumps({**VALID, "cells": 5}), "cells is 5; expected a list of cells"),
    "a bad cell_type": (json.dumps({**VALID, "cells": [{**CELL, "cell_type": "bad"}]}),
                        "cells[0].cell_type is 'bad'; expected 'code', 'markdown' or 'raw'"),
    "a cell that is a string": (json.dumps({**VALID, "cells": ["x"]}), "cells[0] is 'x'; expected a JSON object"),
    "outputs not a list": (json.dumps({**VALID, "cells": [{**CELL, "outputs": {}}]}), "cells[0].outputs is {}"),
    "an unknown output": (json.dumps({**VALID, "cells": [{**CELL, "outputs": [{"output_type": "x"}]}]}),
                          "cells[0].outputs[0] is not an output"),
    "html that is a number": (json.dumps({**VALID, "cells": [{**CELL, "outputs": [{
        "output_type": "display_data", "data": {"text/html": 5}, "metadata": {}}]}]}), "is not a valid notebook"),
    "metadata a number": (json.dumps({**VALID, "metadata": 5}), "metadata must be object"),
    "no version": (json.dumps({"cells": []}), "has no nbformat version"),
    "a future version": (json.dumps({**VALID, "nbformat": 5}), "has nbformat 5; this reads nbformat 4"),
    "not JSON": ("{not json", "is not JSON: Expecting property name enclosed in double quotes at line 1, column 2"),
    "empty": ("", "is not JSON: Expecting value at line 1, column 1"),
    "not UTF-8": (b'{"cells": "caf\xe9"}', "is not UTF-8 text (byte 0xe9 at offset 14)"),
    "a huge number": ('{"nbformat": ' + "9" * 5000 + "}", "is not JSON that can be read"),
    "a long bad value": (json.dumps({**VALID, "cells": [{**CELL, "cell_type": "x" * 5000}]}), "'xxxx"),
}


@pytest.mark.parametrize("content, phrase", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_notebook_is_one_line_naming_the_file(tmp_path, capsys, content, phrase):
    notebook = tmp_path / "broken.ipynb"
    notebook.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    error = refused(capsys, [str(notebook)], str(notebook), phrase)
    assert len(error) < 600, "a value in the notebook is clipped, not echoed whole"
    assert not notebook.with_suffix(".html").exists()
    with pytest.raises(ValueError) as raised:
        notebook_to_html(notebook)
    assert phrase in str(raised.value) and str(notebook) in str(raised.value)


def test_a_folder_or_a_missing_file_is_no_notebook(tmp_path, capsys):
    folder = tmp_path / "folder.ipynb"
    folder.mkdir()
    refused(capsys, [str(folder)], str(folder), "is a folder, not a notebook file")
    with pytest.raises(FileNotFoundError, match="no notebook at .*missing.ipynb"):
        notebook_to_html(tmp_path / "missing.ipynb")


def test_a_version_3_notebook_is_read(tmp_path):
    notebook = tmp_path / "old.ipynb"
    notebook.write_text(json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [
        {"cell_type": "markdown", "source": "an old notebook"}]}]}), encoding="utf-8")
    assert "an old notebook" in notebook_to_html(notebook).read_text(encoding="utf-8")


# Deep nesting and a named pipe: in a child with a memory limit and a timeout (a regression could hang or explode).
CHILD = textwrap.dedent("""
    import contextlib, io, json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    from bertviz_lab.cli import main
    results = []
    for argv in json.loads(sys.argv[1]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["html", *argv])
        results.append({"exit": code, "stderr": err.getvalue()})
    print(json.dumps(results))
""")


def test_deep_nesting_and_pipes_are_refused_in_one_line(tmp_path, saved_notebook):
    deep = tmp_path / "deep.ipynb"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    nested = tmp_path / "nested.ipynb"
    nested.write_text(json.dumps({**VALID, "metadata": {"x": 0}}).replace("0}", "[" * 990 + "]" * 990 + "}"),
                      encoding="utf-8")
    pipe = tmp_path / "pipe.ipynb"
    os.mkfifo(pipe)
    calls = [[str(deep)], [str(nested)], [str(pipe)], [str(saved_notebook), "--output", str(pipe), "--force"]]
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(calls)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    deep_result, nested_result, pipe_result, pipe_page = json.loads(done.stdout.strip().splitlines()[-1])
    assert deep_result["exit"] == 2 and deep_result["stderr"].count("\n") == 1
    assert "deep.ipynb nests its JSON too deeply to read" in deep_result["stderr"]
    assert nested_result["exit"] in (0, 2) and nested_result["stderr"].count("\n") <= 1  # converted, or refused
    assert "Traceback" not in nested_result["stderr"]
    assert pipe_result["exit"] == 2
    assert "pipe.ipynb is a named pipe (FIFO), not a notebook file" in pipe_result["stderr"]
    assert pipe_page["exit"] == 2
    assert "pipe.ipynb is a named pipe (FIFO); --output names the page" in pipe_page["stderr"]


# ---------------------------------------------------------------------------------------------------------------
# --execute: a failing cell and a kernel that is not installed, in one line.


def test_an_unknown_kernel_is_named(tmp_path, capsys):
    notebook = write_notebook(tmp_path / "kernel.ipynb", [nbformat.v4.new_code_cell("1")],
                              kernelspec={"name": "no-such-kernel-x", "display_name": "X", "language": "python"})
    refused(capsys, [str(notebook), "--execute"], str(notebook), "asks for the kernel 'no-such-kernel-x'",
            "not installed here")


@pytest.mark.slow  # starts a kernel
def test_a_failing_cell_is_named_by_index_and_error(tmp_path, capsys):
    notebook = write_notebook(tmp_path / "failing.ipynb", [
        nbformat.v4.new_markdown_cell("m"), nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("raise ValueError('bad value ' + 'x' * 5000)")],
        kernelspec={"name": "python3", "display_name": "Python 3", "language": "python"})
    error = refused(capsys, [str(notebook), "--execute"], str(notebook), "cell 2 failed: ValueError: bad value xxx")
    assert len(error) < 600
    assert not notebook.with_suffix(".html").exists()


@pytest.mark.slow  # starts a kernel
def test_an_executed_panel_shows_its_figure_and_no_widget_repr(tmp_path, capsys):
    """A notebook run by `bertviz-lab html --execute`: each panel's static copy is on the page, and no raw widget
    repr (`AttentionPanel(children=(HBox(…`) is printed under it."""
    notebook = write_notebook(tmp_path / "panels.ipynb", [
        nbformat.v4.new_code_cell("import bertviz_lab as bv\n"
                                  "from bertviz_lab.widgets import AttentionPanel, SaliencyPanel\n"
                                  "model, tokenizer = bv.load_default()\n"
                                  "AttentionPanel(model=model, tokenizer=tokenizer, text='The cat sat on the mat.')"),
        nbformat.v4.new_code_cell("SaliencyPanel(text='The cat sat on the mat.', steps=4)")],
        kernelspec={"name": "python3", "display_name": "Python 3", "language": "python"})
    out = tmp_path / "panels.html"
    assert main(["html", str(notebook), "--execute", "--output", str(out)]) == 0, capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    assert page.count('data-bvl-static="') >= 2 and "bvl-heatmap" in page and "bvl-saliency" in page
    assert not re.search(r"\b(?:AttentionPanel|SaliencyPanel|HBox|VBox|Dropdown)\(", page), \
        re.search(r".{80}\b(?:AttentionPanel|SaliencyPanel|HBox|VBox|Dropdown)\(.{80}", page, re.S).group(0)


def test_outputs_too_big_to_sanitise_are_left_out_with_a_note_and_a_huge_notebook_is_refused(tmp_path, capsys,
                                                                                             monkeypatch):
    from bertviz_lab.widgets import notebook_html

    monkeypatch.setattr(notebook_html, "MAX_SANITISED_CHARS", 10_000)
    big_html = "<p>" + "huge html " * 2_000 + "</p>"
    big_svg = '<svg xmlns="http://www.w3.org/2000/svg">' + "<g/>" * 3_000 + "<text>huge svg</text></svg>"
    notebook = write_notebook(tmp_path / "big.ipynb", [
        shown({"text/html": big_html, "text/plain": "h"}), shown({"image/svg+xml": big_svg, "text/plain": "s"}),
        nbformat.v4.new_raw_cell("<b>huge raw</b>" * 1_000), shown({"text/html": "<p>a small one</p>"})])
    page = notebook_to_html(notebook).read_text(encoding="utf-8")
    assert page.count('class="bvl-left-out"') == 3 and "a small one" in page
    assert "an HTML output of 0.0 million characters left out</b>: the page sanitises at most 0.01 million" in page
    assert "huge html" not in page and "huge svg" not in page and "huge raw" not in page
    trusted = notebook_to_html(notebook, tmp_path / "trusted.html", trust=True).read_text(encoding="utf-8")
    assert "bvl-left-out" not in trusted and "huge html" in trusted  # --trust: nothing is sanitised or left out
    monkeypatch.setattr(notebook_html, "MAX_NOTEBOOK_BYTES", 1_000)
    refused(capsys, [str(notebook), "--force"], str(notebook), "a page is made of notebooks of up to 0.001 MB")


@pytest.mark.slow  # starts a kernel
def test_each_cell_keeps_the_figure_it_made_and_a_changing_cell_shows_the_new_one(tmp_path):
    """A panel shown in one cell and changed by the next ones: the first cell keeps the heatmap it drew, each changing
    cell gets the figure it made (the last state of that cell), in the notebook's order; nothing changes after."""
    notebook = write_notebook(tmp_path / "story.ipynb", [
        nbformat.v4.new_code_cell("import bertviz_lab as bv\n"
                                  "from bertviz_lab.widgets import AttentionPanel\n"
                                  "model, tokenizer = bv.load_default()\n"
                                  "panel = AttentionPanel(model=model, tokenizer=tokenizer, text='The cat sat.', "
                                  "layer=1, head=2)\npanel"),
        nbformat.v4.new_code_cell('panel.view.value = "head view"'),
        nbformat.v4.new_code_cell('panel.view.value = "model view"\npanel.layer.value = 3'),
        nbformat.v4.new_code_cell("x = 1")],
        kernelspec={"name": "python3", "display_name": "Python 3", "language": "python"})
    node = read_notebook(notebook)
    run_notebook(node, notebook, timeout=300)
    figures = [[re.findall(r'class="bvl-fig (bvl-[a-z-]+)"', output.get("data", {}).get("text/html", ""))
                for output in cell.outputs if "text/html" in output.get("data", {})] for cell in node.cells]
    assert figures[0] == [["bvl-heatmap"]], figures[0]
    assert figures[1] == [["bvl-head-view"]] and figures[2] == [["bvl-model-view"]], figures
    assert figures[3] == []
    assert "layer 1 · head 2" in node.cells[0].outputs[0]["data"]["text/html"]
