"""Every view's class sends the browser its esbuild bundle (views/static, `npm run build`), never the source module
whose `import ... from "./shared.js"` anywidget could not follow; what the bundles hold is tests/js/bundles.test.mjs's
subject, and the build that makes them is tests/test_front_end_build.py's."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import anywidget
import pytest

from bertviz_lab.widgets.views import front_end
from bertviz_lab.widgets.views.front_end import BUILT, FOLDER, bundle, esm


def view_classes() -> dict[str, type]:
    """The anywidget classes of bertviz_lab.widgets.views that name their own front end."""
    found = {}
    for module_info in pkgutil.iter_modules([str(FOLDER)]):
        module = importlib.import_module(f"bertviz_lab.widgets.views.{module_info.name}")
        for name, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, anywidget.AnyWidget) and "_esm" in vars(value) and value.__module__ == module.__name__:
                found[name] = value
    return found


def test_every_view_sends_a_bundle_and_every_bundle_is_sent():
    bundles = {path.name: path.read_text(encoding="utf-8") for path in BUILT.glob("*.js")}
    classes = view_classes()
    assert classes and len(bundles) == len(classes)
    sent = {}
    for name, cls in classes.items():
        code = cls._esm  # text, not a path: anywidget would tie every instance to the file's change signal
        assert isinstance(code, str), name
        sent[name] = [bundle_name for bundle_name, text in bundles.items() if text == code]
        assert len(sent[name]) == 1, f"{name} sends no built bundle"
        assert 'from "./shared.js"' not in code and "import {" not in code
    assert sorted(sum(sent.values(), [])) == sorted(bundles)


def test_the_code_of_a_view_is_its_bundle_with_the_shared_helpers_in_it():
    code = esm("heatmap.js")
    assert code == (BUILT / "heatmap.js").read_text(encoding="utf-8")
    assert "function showFigure(" in code and "function cellAt(" in code  # from shared.js, and its own


def test_a_view_that_is_not_built_says_how_to_build_it(monkeypatch, tmp_path):
    monkeypatch.setattr(front_end, "BUILT", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"is not built: run `npm ci && npm run build`") as raised:
        bundle("heatmap.js")
    assert "\n" not in str(raised.value)
