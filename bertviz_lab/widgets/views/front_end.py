"""The views' front ends: one ES module and one stylesheet per view in this folder.

anywidget loads a view's code as one module that cannot import its neighbours, so `import {...} from "./shared.js"`
at the top of a view is replaced here by the shared helpers it names (and those they use); Node's test runner
imports the same files unchanged. Whole-line comments are left out of what is sent: every instance of a view carries
its code in its widget state, which a notebook that keeps widget state stores once per instance.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from bertviz_lab.widgets.figures.masking import FATES
from bertviz_lab.widgets.figures.palette import COLORS, HEAD_COLORS, ink_on

FOLDER = Path(__file__).parent
_SHARED_IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"\./shared\.js";\s*$', re.M)
_DECLARATION = re.compile(r"^export (?:function|const) (\w+)", re.M)


def _shared_helpers() -> dict[str, str]:
    """shared.js as {name: its declaration, comment included}, in file order."""
    code = (FOLDER / "shared.js").read_text(encoding="utf-8")
    starts = [match.start() for match in _DECLARATION.finditer(code)]
    helpers = {}
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(code)
        body = re.sub(r"^export ", "", code[start:end].rstrip(), flags=re.M)
        helpers[_DECLARATION.match(code, start).group(1)] = body
    return helpers


def _needed(names: list[str], helpers: dict[str, str]) -> list[str]:
    """The helpers `names` use, directly or through one another, in file order."""
    wanted, todo = set(), [name for name in names if name in helpers]
    unknown = [name for name in names if name not in helpers]
    if unknown:
        raise ValueError(f"shared.js has no {', '.join(unknown)}")
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo += [other for other in helpers if other not in wanted and re.search(rf"\b{other}\b", helpers[name])]
    return [name for name in helpers if name in wanted]


def _without_comment_lines(code: str) -> str:
    return "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("//")) + "\n"


@functools.cache
def esm(name: str) -> str:
    """The ES module of the view `name` in this folder, with the shared helpers it imports put in place."""
    code = (FOLDER / name).read_text(encoding="utf-8")
    found = _SHARED_IMPORT.search(code)
    if found is not None:
        helpers = _shared_helpers()
        names = [part.strip() for part in found.group(1).split(",") if part.strip()]
        code = code[:found.start()] + "\n".join(helpers[n] for n in _needed(names, helpers)) + code[found.end():]
    return _without_comment_lines(code)


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
