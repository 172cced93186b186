"""setup.py's step before every build (a wheel's, an editable install's): the widgets' front ends are bundled where a
bundle is missing or older than the sources, with npm, installing the lock file's esbuild first where needed; without
npm, bundles that exist are kept and none at all stops the build in one line. Run here on a small tree of its own
with a stand-in npm that records what it was asked; the real build is tests/js/bundles.test.mjs's subject."""

from __future__ import annotations

import importlib.util
import os
import stat
import time
from pathlib import Path

import pytest
from setuptools.errors import SetupError

REPO = Path(__file__).resolve().parents[1]
VIEWS = Path("bertviz_lab/widgets/views")


def load_setup():
    spec = importlib.util.spec_from_file_location("bertviz_lab_setup", REPO / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not as __main__: setup() itself does not run
    return module


setup_py = load_setup()


def small_tree(root: Path) -> Path:
    (root / VIEWS).mkdir(parents=True)
    (root / VIEWS / "shared.js").write_text("export function helper() {}\n", encoding="utf-8")
    view = 'import { helper } from "./shared.js";\nfunction render() { helper(); }\nexport default { render };\n'
    for name in ("one", "two"):
        (root / VIEWS / f"{name}.js").write_text(view, encoding="utf-8")
    (root / "package-lock.json").write_text("{}\n", encoding="utf-8")
    return root


def stand_in_npm(folder: Path) -> tuple[str, Path]:
    """An npm that logs its arguments, installs esbuild on `ci` and writes each view's bundle on `run build`."""
    log = folder / "npm.log"
    script = folder / "npm"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {log}
if [ "$1" = ci ]; then mkdir -p node_modules/.bin && touch node_modules/.bin/esbuild; fi
if [ "$1 $2" = "run build" ]; then
  mkdir -p {VIEWS}/static
  for view in one two; do echo "// bundled" > {VIEWS}/static/$view.js; done
fi
""", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), log


def built(root: Path, *names: str) -> None:
    (root / VIEWS / "static").mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / VIEWS / "static" / f"{name}.js").write_text("// bundled\n", encoding="utf-8")


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_missing_bundles_are_built_with_the_lock_files_esbuild_installed_first(tmp_path):
    root = small_tree(tmp_path / "tree")
    npm, log = stand_in_npm(tmp_path)
    assert setup_py.bundles_to_build(root) == "missing one.js, two.js"  # shared.js has no default export: no bundle
    assert setup_py.build_front_ends(root, npm) == "built the widgets' front ends (missing one.js, two.js)"
    assert log.read_text().splitlines() == ["ci --no-audit --no-fund", "run build"]
    assert setup_py.bundles_to_build(root) is None
    assert setup_py.build_front_ends(root, npm) == "the widgets' front ends are up to date"
    assert len(log.read_text().splitlines()) == 2


def test_a_bundle_older_than_a_source_is_rebuilt_without_reinstalling(tmp_path):
    root = small_tree(tmp_path / "tree")
    npm, log = stand_in_npm(tmp_path)
    built(root, "one", "two")
    (root / "node_modules" / ".bin").mkdir(parents=True)
    (root / "node_modules" / ".bin" / "esbuild").touch()
    for bundle in (root / VIEWS / "static").iterdir():
        age(bundle, 60)
    for source in [*(root / VIEWS).glob("*.js"), root / "package-lock.json"]:
        age(source, 120)
    assert setup_py.bundles_to_build(root) is None
    (root / VIEWS / "shared.js").touch()
    assert setup_py.bundles_to_build(root) == f"older than {VIEWS / 'shared.js'}"
    setup_py.build_front_ends(root, npm)
    assert log.read_text().splitlines() == ["run build"]


def test_without_npm_built_bundles_are_kept_and_none_stops_the_build_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    root = small_tree(tmp_path / "tree")
    with pytest.raises(SetupError) as raised:
        setup_py.build_front_ends(root)
    assert "\n" not in str(raised.value) and "npm is not on PATH" in str(raised.value)
    assert "npm ci && npm run build" in str(raised.value)
    built(root, "one", "two")
    (root / VIEWS / "one.js").touch()
    age(root / VIEWS / "static" / "one.js", 60)
    assert setup_py.build_front_ends(root).startswith("npm is not on PATH: the widgets' front ends are kept as built")


def test_a_failing_npm_stops_the_build_naming_the_command(tmp_path):
    root = small_tree(tmp_path / "tree")
    failing = tmp_path / "npm"
    failing.write_text("#!/bin/sh\nexit 3\n", encoding="utf-8")
    failing.chmod(0o755)
    with pytest.raises(SetupError, match=r"`npm ci --no-audit --no-fund` failed \(exit 3\)"):
        setup_py.build_front_ends(root, str(failing))


def test_the_build_runs_before_setuptools_copies_the_package():
    commands = [name for name, _ in setup_py.BuildWithFrontEnds.sub_commands]
    assert commands[:2] == ["build_front_ends", "build_py"]


def test_an_sdist_holds_the_bundles_without_their_sources_and_needs_no_build(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    root = tmp_path / "sdist"
    (root / VIEWS).mkdir(parents=True)
    (root / VIEWS / "heatmap.css").write_text(".bvl-fig {}\n", encoding="utf-8")
    with pytest.raises(SetupError, match="not built"):
        setup_py.build_front_ends(root)
    built(root, "one", "two")
    assert setup_py.bundles_to_build(root) is None
    assert setup_py.build_front_ends(root) == "the widgets' front ends are up to date"
