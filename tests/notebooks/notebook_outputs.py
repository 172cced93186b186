"""The reference outputs of the notebooks' checked cells, kept beside the clean notebooks, and nbval runs on copies.

Committed notebooks carry no outputs. The cells whose source starts with `# NBVAL_CHECK_OUTPUT` have their
expected text outputs in expected_outputs.json; a test writes a copy of each notebook with those outputs filled
in and lets nbval (`--nbval-lax`) execute it and compare. `python tests/notebooks/notebook_outputs.py [NAME.ipynb ...]`
refreshes the expectations after an intended change.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
EXPECTED = Path(__file__).with_name("expected_outputs.json")
SANITIZE = Path(__file__).with_name("sanitize.cfg")
MARKER = "# NBVAL_CHECK_OUTPUT"
KEPT_OUTPUT_KEYS = {"stream": ("name", "text"), "execute_result": ("data",), "error": ("ename", "evalue")}


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def needed_programs(notebook: nbformat.NotebookNode) -> set[str]:
    """System programs the notebook's cells call (tests/system_programs.py): dot where a cell draws with graphviz."""
    source = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    return {"dot"} if re.search(r"to_graphviz\(|renderer=[\"']graphviz", source) else set()


def checked_cells(notebook: nbformat.NotebookNode) -> list[int]:
    """Indices of the code cells nbval compares."""
    return [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code" and cell.source.startswith(MARKER)]


def text_only(outputs: list[dict]) -> list[dict]:
    """Keep what a reader compares: stream text and plain-text results."""
    kept = []
    for output in outputs:
        kind = output["output_type"]
        if kind == "stream":
            kept.append({"output_type": "stream", "name": output["name"], "text": output["text"]})
        elif kind == "execute_result" and "text/plain" in output.get("data", {}):
            kept.append({"output_type": "execute_result", "execution_count": None, "metadata": {},
                         "data": {"text/plain": output["data"]["text/plain"]}})
    return kept


def with_expected_outputs(notebook: nbformat.NotebookNode, expected: dict[str, list[dict]]) -> nbformat.NotebookNode:
    """A copy of the notebook whose checked cells hold their expected outputs."""
    filled = copy.deepcopy(notebook)
    for index in checked_cells(filled):
        filled.cells[index].outputs = [nbformat.from_dict(o) for o in expected.get(str(index), [])]
        filled.cells[index].execution_count = index + 1  # nbval skips the comparison of cells marked unrun
    return filled


def write_run_folder(folder: Path, notebooks: dict[str, nbformat.NotebookNode]) -> Path:
    """folder/notebooks/*.ipynb beside folder/configs, so the notebooks' relative paths resolve."""
    target = folder / "notebooks"
    target.mkdir(parents=True, exist_ok=True)
    configs = folder / "configs"
    if not configs.exists():
        configs.symlink_to(ROOT / "configs", target_is_directory=True)
    for name, notebook in notebooks.items():
        nbformat.write(notebook, target / name)
    return target


def run_nbval(paths: list[Path], timeout: int = 900) -> subprocess.CompletedProcess:
    """Execute notebooks under nbval in a fresh pytest process and return the result."""
    command = [sys.executable, "-m", "pytest", "--nbval-lax", f"--nbval-sanitize-with={SANITIZE}",
               "--nbval-cell-timeout=300", "-p", "no:cacheprovider", "-q", "-o", "addopts=", *map(str, paths)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=paths[0].parent, env=env)


def refresh(names: list[str]) -> None:
    """Execute the named notebooks (default: all) and store their checked cells' outputs as the new expectations."""
    from nbclient import NotebookClient

    expected = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
    for path in notebook_paths():
        if names and path.name not in names:
            continue
        notebook = nbformat.read(path, as_version=4)
        NotebookClient(notebook, timeout=600, resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
        expected[path.name] = {str(i): text_only(notebook.cells[i].outputs) for i in checked_cells(notebook)}
        print(f"{path.name}: {len(expected[path.name])} checked cells")
    EXPECTED.write_text(json.dumps(expected, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    refresh(sys.argv[1:])
