"""Each layer knows only the one below it: the model reaches the fast paths through the kernels seam alone and
knows nothing of traces or widgets (checked on the import statements of its source)."""

from __future__ import annotations

import ast
import re
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
    """Attention, LayerNorm and GELU are written out in the model, each reaching the backend it was given through
    one call, and no kernels function is called from the layers."""
    source = (PACKAGE / "model" / "layers.py").read_text()
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    assert re.findall(r"\bkernels\.(\w+)\(", code) == []
    assert len(re.findall(r"\bbackend\(", code)) == 1  # attention
    assert len(re.findall(r"\bfused\(", code)) == 2  # add + LayerNorm, linear + GELU
    assert "softmax(" in code and "self.probs(" in code
    assert "layer_norm(self.LayerNorm, self.dropout(y) + residual" in code and "self.intermediate_act_fn(y)" in code


def module_name(path: Path) -> str:
    """bertviz_lab.a.b for PACKAGE/a/b.py, bertviz_lab.a for PACKAGE/a/__init__.py."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_nodes(tree: ast.AST):
    """Every node of a module except those under `if TYPE_CHECKING:` (annotations only, never imported)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *runtime_nodes(child)])
            continue
        yield node
        yield from runtime_nodes(node)


def import_graph() -> dict[str, set[str]]:
    """Module -> the bertviz_lab modules it imports, at any depth of the file (imports inside functions count:
    a late import hides a cycle, it does not remove it); `from pkg import name` points at pkg.name where that is a
    module, else at pkg."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    targets.add(child if child in modules else node.module)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_package_imports_itself_back():
    assert cycles(import_graph()) == []


def test_widget_tiers_import_downwards_only():
    """figures know nothing of widgets; views know no panels; nothing in the package imports a test helper."""
    graph = import_graph()
    for name, targets in graph.items():
        if name.startswith("bertviz_lab.widgets.figures"):
            assert not {t for t in targets if t.startswith(("bertviz_lab.widgets.views", "bertviz_lab.widgets.panels"))}
            assert not {"ipywidgets", "anywidget"} & imported_modules(PACKAGE.parent / (name.replace(".", "/") + ".py"))
        if name.startswith("bertviz_lab.widgets.views"):
            assert not {t for t in targets if t.startswith("bertviz_lab.widgets.panels")}, name
