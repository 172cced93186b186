"""The views' front ends: one ES module and one stylesheet per view in this folder.

anywidget loads a view's code as one module that cannot import its neighbours, so `import {...} from "./shared.js"`
at the top of a view is replaced here by shared.js itself; Node's test runner imports the same files unchanged.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

FOLDER = Path(__file__).parent
_SHARED_IMPORT = re.compile(r'^import\s*\{[^}]*\}\s*from\s*"\./shared\.js";\s*$', re.M)


@functools.cache
def esm(name: str) -> str:
    """The ES module of the view `name` in this folder, with the shared helpers it imports put in place."""
    code = (FOLDER / name).read_text(encoding="utf-8")
    if _SHARED_IMPORT.search(code) is None:
        return (FOLDER / "shared.js").read_text(encoding="utf-8") + "\n" + code
    shared = (FOLDER / "shared.js").read_text(encoding="utf-8").replace("export function", "function")
    shared = re.sub(r"^export const", "const", shared, flags=re.M)
    return _SHARED_IMPORT.sub(lambda _: shared, code, count=1)


@functools.cache
def css(name: str = "") -> str:
    """The stylesheet of view `name` (its .css file, if any) after the one every figure shares (figure.css)."""
    sheets = [FOLDER / "figure.css"] + ([FOLDER / f"{name}.css"] if name else [])
    return "\n".join(path.read_text(encoding="utf-8") for path in sheets if path.exists())


def all_css() -> str:
    """Every view's stylesheet: what a static copy embeds, since it may hold several views' figures."""
    names = sorted(path.stem for path in FOLDER.glob("*.css") if path.stem != "figure")
    return css() + "\n" + "\n".join((FOLDER / f"{name}.css").read_text(encoding="utf-8") for name in names)
