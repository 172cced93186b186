"""The views' front ends: one ES module and one stylesheet per view in this folder.

A view's module imports the helpers it shares with the others (`import {...} from "./shared.js"`), which anywidget
cannot follow: it loads a view's code as one module from a string. esbuild bundles each view's module with what it
imports into static/NAME.js (`npm run build`, tools/build_front_ends.mjs; setup.py runs it in every install), and a
view's class sends that bundle. Node's test runner imports the sources themselves.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from bertviz_lab.widgets.figures.masking import FATES
from bertviz_lab.widgets.figures.palette import COLORS, HEAD_COLORS, ink_on

FOLDER = Path(__file__).parent
BUILT = FOLDER / "static"


def bundle(name: str) -> Path:
    """The built ES module of the view whose source is `name` (e.g. "heatmap.js")."""
    path = BUILT / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not built: run `npm ci && npm run build` in the repository "
                                "(`pip install -e .` runs them where npm is installed)")
    return path


def esm(name: str) -> str:
    """The code the browser runs for the view whose source is `name`: its bundle, shared helpers included. A class
    sends it as text, not as the bundle's path: for a path anywidget connects every instance to the file's change
    signal, which keeps each view (and its data) alive after it is closed."""
    return bundle(name).read_text(encoding="utf-8")


def _without_comments(sheet: str) -> str:
    return re.sub(r"/\*.*?\*/\s*", "", sheet, flags=re.S)


@functools.cache
def css(name: str) -> str:
    """The stylesheet `name`.css of this folder ("" where there is none): a view's own rules."""
    path = FOLDER / f"{name}.css"
    return _without_comments(path.read_text(encoding="utf-8")) if path.exists() else ""


def chip_css() -> str:
    """The chips' fills in the panels' HTML (masking fates, tags bvl-tag-0...), each with the ink that reads on it:
    made from the palette, so the HTML chips and the figures' chips cannot drift apart."""
    kinds = {fate: COLORS[fate] for _, fate in FATES} | {f"tag-{i}": color for i, color in enumerate(HEAD_COLORS)}
    return "\n".join(f".bvl-chip.bvl-{kind} {{ background: {color}; color: {ink_on(color)}; }}"
                     for kind, color in kinds.items())


@functools.cache
def all_css() -> str:
    """figure.css, every view's stylesheet and the chips' colours: what a static copy and an export embed (they may
    hold several views' figures), and what every live panel's link puts in the page once, for its views and its own
    HTML."""
    names = sorted(path.stem for path in FOLDER.glob("*.css") if path.stem != "figure")
    return "\n".join([*(css(name) for name in ["figure", *names]), chip_css()])
