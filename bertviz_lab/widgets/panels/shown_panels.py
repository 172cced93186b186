"""Which panels each notebook cell shows, so that running a cell again closes the panels its last run showed.

Running a cell clears its outputs, but the panels they showed stay registered in ipywidgets, each with its trace
(77 MB for an attention panel at 512 tokens): twenty runs of a `%bert_inspect` cell held 1.5 GB. Front ends name
the cell in each execute request (`metadata.cellId`: JupyterLab, Notebook 7, VS Code); where one does not, nothing
is closed. When a run ends, the panels the cell's previous run showed are closed unless this run or another cell's
latest run shows them too.
"""

from __future__ import annotations

from typing import Any

_LATEST: dict[str, list[Any]] = {}  # cell id -> the panels its latest finished run showed
_RUNNING: dict[tuple[str, str], list[Any]] = {}  # (cell id, run id) -> the panels the run in progress shows
_HOOKED: list[Any] = []  # the IPython shell whose post_run_cell event calls run_finished


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _current_run(shell: Any) -> tuple[str, str] | None:
    """(cell id, execute request id) of the code `shell` runs now, or None outside a notebook cell."""
    parent = getattr(shell, "parent_header", None) or {}
    cell = (parent.get("metadata") or {}).get("cellId")
    run = (parent.get("header") or {}).get("msg_id")
    return (str(cell), str(run)) if cell and run else None


def shown(panel: Any) -> None:
    """Note that the cell running now shows `panel` (and have the shell tell us when its runs end)."""
    shell = _shell()
    current = _current_run(shell)
    if current is None:
        return
    if shell not in _HOOKED:
        shell.events.register("post_run_cell", run_finished)
        _HOOKED.append(shell)
    _RUNNING.setdefault(current, []).append(panel)


def run_finished(*_: Any) -> None:
    """A cell's run ended: close what its previous run showed and nothing shows any more."""
    current = _current_run(_shell())
    if current is None:
        return
    cell = current[0]
    now = _RUNNING.pop(current, [])
    for key in [key for key in _RUNNING if key[0] == cell]:  # runs of this cell that never finished
        now.extend(_RUNNING.pop(key))
    before = _LATEST.get(cell, [])
    _LATEST[cell] = now
    kept = {id(panel) for panels in _LATEST.values() for panel in panels}
    for panel in before:
        if id(panel) not in kept:
            panel.close()
            kept.add(id(panel))
