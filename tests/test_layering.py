"""Each layer knows only the one below it: the model reaches the fast paths through the kernels seam alone and
knows nothing of traces or widgets, and packages import downwards only (checked on the import statements of the
source; what the layers do with their backends is checked by running them, tests/model/test_fast_path_calls.py)."""

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
            path = PACKAGE.parent / name.replace(".", "/")
            assert not {"ipywidgets", "anywidget"} & imported_modules(
                path / "__init__.py" if path.is_dir() else path.with_suffix(".py"))
        if name.startswith("bertviz_lab.widgets.views"):
            assert not {t for t in targets if t.startswith("bertviz_lab.widgets.panels")}, name


# kernels < model < trace < {corpus, train} < widgets < views < the command line; util and device under all of them
PACKAGE_ORDER = {"util": 0, "device": 0, "kernels": 1, "model": 2, "trace": 3, "corpus": 4, "train": 4,
                 "widgets": 5, "views": 6, "cli": 7, "magics": 7, "__main__": 8}


def package_of(module: str) -> str:
    """bertviz_lab.train.runner -> train; bertviz_lab (the package's own __init__) -> ""."""
    return module.split(".")[1] if "." in module else ""


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """"a -> b" for every import of a module from a package above its own, or beside it (corpus and train)."""
    found = []
    for name, targets in sorted(graph.items()):
        home = package_of(name)
        if not home:
            continue  # the package's __init__ re-exports the API: it stands above everything
        for target in sorted(targets):
            there = package_of(target)
            if there != home and (not there or PACKAGE_ORDER[there] >= PACKAGE_ORDER[home]):
                found.append(f"{name} -> {target}")
    return found


def test_every_package_has_its_place_in_the_order():
    packages = {package_of(name) for name in import_graph()} - {""}
    assert packages <= set(PACKAGE_ORDER), sorted(packages - set(PACKAGE_ORDER))


def test_packages_import_downwards_only():
    """Imports inside functions count: a late import hides an upward dependency, it does not remove it."""
    assert upward_imports(import_graph()) == []


def test_the_order_check_finds_an_upward_or_sideways_import():
    graph = {"bertviz_lab.kernels.choice": {"bertviz_lab.model.config"},
             "bertviz_lab.corpus.analyze": {"bertviz_lab.train.trainer", "bertviz_lab.util.files"},
             "bertviz_lab.cli": {"bertviz_lab.train.runner"}, "bertviz_lab.__main__": {"bertviz_lab.cli"}}
    assert upward_imports(graph) == ["bertviz_lab.corpus.analyze -> bertviz_lab.train.trainer",
                                     "bertviz_lab.kernels.choice -> bertviz_lab.model.config"]
