"""The notebooks: committed clean, run top to bottom under nbval, checked cells compared with their expectations."""

from __future__ import annotations

import json

import nbformat
import pytest
from notebook_outputs import (
    EXPECTED,
    checked_cells,
    needed_programs,
    notebook_paths,
    run_nbval,
    with_expected_outputs,
    write_run_folder,
)

PATHS = notebook_paths()
NAMES = [p.name for p in PATHS]


def with_program_marks() -> list:
    """Each notebook as a parameter marked with the system programs it needs, so a missing one skips only it."""
    return [pytest.param(path, marks=[pytest.mark.needs_program(p) for p in
                                      sorted(needed_programs(nbformat.read(path, as_version=4)))], id=path.name)
            for path in PATHS]


@pytest.fixture(scope="session")  # not per module: the notebooks' runs then spread over pytest-xdist's workers
def expected() -> dict:
    return json.loads(EXPECTED.read_text())


def test_the_six_notebooks_exist():
    assert NAMES[:6] == ["00_workbench.ipynb", "01_model_tour.ipynb", "02_attention.ipynb", "03_masking.ipynb",
                         "04_pretraining_live.ipynb", "05_architecture.ipynb"]


@pytest.mark.parametrize("path", PATHS, ids=NAMES)
def test_committed_notebook_is_clean(path):
    notebook = nbformat.read(path, as_version=4)
    dirty = [i for i, cell in enumerate(notebook.cells) if cell.get("outputs") or cell.get("execution_count")]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; commit notebooks without outputs"
    assert "widgets" not in notebook.metadata, f"{path.name} carries widget state; clear it before committing"


@pytest.mark.parametrize("path", PATHS, ids=NAMES)
def test_every_checked_cell_has_an_expectation(path, expected):
    notebook = nbformat.read(path, as_version=4)
    missing = [i for i in checked_cells(notebook) if not expected.get(path.name, {}).get(str(i))]
    assert checked_cells(notebook), f"{path.name} has no `# NBVAL_CHECK_OUTPUT` cell"
    assert not missing, (f"{path.name}: checked cells {missing} have no expected output; "
                         "run `python tests/notebooks/notebook_outputs.py`")


@pytest.mark.slow
@pytest.mark.parametrize("path", with_program_marks())
def test_notebook_runs_and_matches_its_expectations(tmp_path, expected, path):
    notebook = with_expected_outputs(nbformat.read(path, as_version=4), expected.get(path.name, {}))
    folder = write_run_folder(tmp_path, {path.name: notebook})
    result = run_nbval([folder / path.name])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


@pytest.mark.slow
def test_a_changed_checked_output_fails(tmp_path, expected):
    """Proof that the comparison bites: a masking count that differs from the reference fails nbval."""
    path = next(p for p in PATHS if p.name == "03_masking.ipynb")
    notebook = with_expected_outputs(nbformat.read(path, as_version=4), expected[path.name])
    counts = next(i for i in checked_cells(notebook) if "'selected': " in notebook.cells[i].outputs[0].get("text", ""))
    output = notebook.cells[counts].outputs[0]
    output["text"] = output["text"].replace("'selected': ", "'selected': 1")
    folder = write_run_folder(tmp_path, {path.name: notebook})
    result = run_nbval([folder / path.name])
    assert result.returncode != 0
    assert "03_masking.ipynb::Cell" in result.stdout
