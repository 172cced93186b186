"""`bertviz-lab html`: a notebook as one HTML page with its static copies and no script fetched from anywhere."""

from __future__ import annotations

import re

import nbformat
import pytest
import torch
from nbconvert import HTMLExporter

from bertviz_lab.__main__ import main
from bertviz_lab.widgets import DevicePicker
from bertviz_lab.widgets.notebook_html import notebook_to_html


@pytest.fixture
def saved_notebook(tmp_path):
    """A notebook as JupyterLab saves it after a panel was shown: the static copy, then the widget view."""
    copy = DevicePicker(torch.nn.Linear(2, 2)).static_copy.bundle()
    widget = {"application/vnd.jupyter.widget-view+json": {"model_id": "0" * 32, "version_major": 2,
                                                           "version_minor": 0}, "text/plain": "DevicePicker(...)"}
    cell = nbformat.v4.new_code_cell("DevicePicker(model)", execution_count=1, outputs=[
        nbformat.v4.new_output("display_data", data=copy), nbformat.v4.new_output("display_data", data=widget)])
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Devices\n\n$x^2$"), cell])
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2,
                                                                                  "version_minor": 0}}
    path = tmp_path / "devices.ipynb"
    nbformat.write(notebook, path)
    return path


def test_the_page_keeps_the_static_copy_and_fetches_no_script(saved_notebook):
    page = notebook_to_html(saved_notebook).read_text(encoding="utf-8")
    assert 'data-bvl-static="' in page and "bvl-devices" in page and "model on cpu" in page
    assert re.findall(r"<script[^>]*\bsrc=", page) == []
    assert re.findall(r"<(?:link|img|iframe)[^>]+(?:href|src)=\"https?://", page) == []  # nor a style sheet or image
    nbconvert_page, _ = HTMLExporter(template_name="lab").from_filename(str(saved_notebook))
    assert re.findall(r"<script[^>]*\bsrc=\"https?://", nbconvert_page)  # what the plain template would fetch


def test_the_command_names_the_page_or_the_error(saved_notebook, tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["html", str(saved_notebook), "--output", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out) and out.stat().st_size > 1000
    assert main(["html", str(tmp_path / "missing.ipynb")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "no notebook at" in error and "missing.ipynb" in error
