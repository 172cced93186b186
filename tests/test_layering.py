"""Each layer knows only the one below it: the model reaches the fast paths through the kernels seam alone and
knows nothing of traces or widgets (checked on the import statements of its source)."""

from __future__ import annotations

import ast
from pathlib import Path

import bertviz_lab

PACKAGE = Path(bertviz_lab.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, names included (`from a import b` gives a and a.b)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def test_the_model_imports_the_kernels_seam_only_and_no_tracer_or_widget():
    for path in sorted((PACKAGE / "model").glob("*.py")):
        imports = imported_modules(path)
        assert not {m for m in imports if m.startswith(("bertviz_lab.trace", "bertviz_lab.widgets"))}, path.name
        internals = {m for m in imports if m.startswith("bertviz_lab.kernels.")}
        assert not internals, f"{path.name} reaches into {sorted(internals)}: use `from bertviz_lab import kernels`"


def test_the_layers_file_has_one_call_per_fast_path():
    source = (PACKAGE / "model" / "layers.py").read_text()
    calls = sorted(line.split("kernels.")[1].split("(")[0] for line in source.splitlines()
                   if "kernels." in line and not line.lstrip().startswith(("#", "The fast")))
    assert calls == ["attention", "linear_activation", "residual_layer_norm"]
