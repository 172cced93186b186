"""The package's build: setuptools as pyproject.toml configures it, with one step of its own, the widgets' front ends.

Each view's ES module in bertviz_lab/widgets/views is bundled by esbuild (`npm run build`) into views/static/, which
the wheel ships and anywidget loads. `build_front_ends` runs first in every build, a wheel's and an editable
install's alike, and before an sdist, which carries the bundles: where a bundle is missing or older than the sources
it runs `npm run build` (after `npm ci` where node_modules has no esbuild yet). Without npm it keeps the bundles there
are (as in an sdist) and stops, in one line, where there are none.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from setuptools import Command, setup
from setuptools.command.build import build
from setuptools.command.sdist import sdist
from setuptools.errors import SetupError

ROOT = Path(__file__).resolve().parent
VIEWS = ROOT / "bertviz_lab" / "widgets" / "views"
BUILT = VIEWS / "static"
BUILD_SCRIPT = ROOT / "tools" / "build_front_ends.mjs"
NO_NPM = ("the widgets' front ends (bertviz_lab/widgets/views/static/*.js) are not built and npm is not on PATH: "
          "install Node.js 20+ with npm and build again (it runs `npm ci && npm run build`)")


def view_modules(views: Path = VIEWS) -> list[Path]:
    """The modules esbuild bundles, as tools/build_front_ends.mjs picks them: those with a default export."""
    return sorted(path for path in views.glob("*.js")
                  if re.search(r"^export default ", path.read_text(encoding="utf-8"), re.M))


def bundles_to_build(root: Path = ROOT) -> str | None:
    """Why the front ends must be built ("missing ...", "older than ..."), or None where the bundles are current."""
    views, built = root / VIEWS.relative_to(ROOT), root / BUILT.relative_to(ROOT)
    modules = view_modules(views)
    if not modules:  # an sdist: the bundles without their sources
        return None if any(built.glob("*.js")) else "missing every bundle"
    bundles = [built / f"{module.stem}.js" for module in modules]
    missing = [bundle.name for bundle in bundles if not bundle.exists()]
    if missing:
        return f"missing {', '.join(missing)}"
    inputs = [*views.glob("*.js"), *(root / name for name in ("package-lock.json", BUILD_SCRIPT.relative_to(ROOT)))]
    newest = max((path for path in inputs if path.exists()), key=lambda path: path.stat().st_mtime)
    if newest.stat().st_mtime > min(bundle.stat().st_mtime for bundle in bundles):
        return f"older than {newest.relative_to(root)}"
    return None


def build_front_ends(root: Path = ROOT, npm: str | None = None) -> str:
    """Bring the bundles up to date; what was done, in words. Raises SetupError where they cannot be built."""
    reason = bundles_to_build(root)
    if reason is None:
        return "the widgets' front ends are up to date"
    npm = npm or shutil.which("npm")
    if npm is None:
        if reason.startswith("missing"):
            raise SetupError(NO_NPM)
        return f"npm is not on PATH: the widgets' front ends are kept as built ({reason})"
    if not (root / "node_modules" / ".bin" / "esbuild").exists():
        _npm(npm, ["ci", "--no-audit", "--no-fund"], root)
    _npm(npm, ["run", "build"], root)
    return f"built the widgets' front ends ({reason})"


def _npm(npm: str, arguments: list[str], root: Path) -> None:
    done = subprocess.run([npm, *arguments], cwd=root, check=False)
    if done.returncode != 0:
        raise SetupError(f"`npm {' '.join(arguments)}` failed (exit {done.returncode}): see its output above")


class BuildFrontEnds(Command):
    """setup.py command: bundle the views' ES modules where they are missing or out of date."""

    description = "bundle the widgets' front ends with esbuild (npm run build) where they are missing or out of date"
    user_options: list = []

    def initialize_options(self) -> None:
        pass

    def finalize_options(self) -> None:
        pass

    def run(self) -> None:
        done = build_front_ends()
        self.announce(done, level=3 if done.startswith("npm is not on PATH") else 2)  # a warning: they may be stale


class BuildWithFrontEnds(build):
    """`build` (which wheels and editable installs both run) with the front ends first, so build_py copies them."""

    sub_commands = [("build_front_ends", None), *build.sub_commands]


class SdistWithFrontEnds(sdist):
    """An sdist that carries the bundles, so that a wheel builds from it without npm (it holds no package.json)."""

    def run(self) -> None:
        self.run_command("build_front_ends")
        super().run()


if __name__ == "__main__":
    setup(cmdclass={"build": BuildWithFrontEnds, "build_front_ends": BuildFrontEnds, "sdist": SdistWithFrontEnds})
