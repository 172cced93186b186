"""The focus ring every panel and view shares (views/panels.css): one rule, in JupyterLab's accent colour, which keeps a
non-text contrast of 3:1 or more (WCAG 2.2, 1.4.11 and 2.4.13) against the ground of JupyterLab Light and Dark as the
installed JupyterLab defines them."""

from __future__ import annotations

import re
from pathlib import Path

import jupyterlab
import pytest

from bertviz_lab.widgets.figures.contrast import contrast_ratio
from bertviz_lab.widgets.views.front_end import FOLDER, all_css

THEMES = Path(jupyterlab.__file__).parent / "themes" / "@jupyterlab"
NAMED = {"white": "#ffffff", "black": "#000000"}
RULE = re.compile(r"([^{}]*:focus-visible[^{}]*)\{([^}]*)\}")


def theme_value(theme: str, name: str) -> str:
    """A colour variable of an installed JupyterLab theme as #rrggbb (a var()'s fallback where it names another)."""
    css = (THEMES / f"theme-{theme}-extension" / "index.css").read_text(encoding="utf-8")
    found = re.search(rf"{re.escape(name)}\s*:\s*([^;]+);", css)
    assert found, f"JupyterLab {theme} defines no {name}"
    value = found.group(1).strip()
    fallback = re.fullmatch(r"var\([^,]+,\s*(#[0-9a-fA-F]{3,6})\s*\)", value)
    value = NAMED.get(value, fallback.group(1) if fallback else value)
    if re.fullmatch(r"#[0-9a-fA-F]{3}", value):
        value = "#" + "".join(c * 2 for c in value[1:])
    assert re.fullmatch(r"#[0-9a-fA-F]{6}", value), f"{name} in {theme} is {found.group(1)!r}, not a colour"
    return value


def focus_rules(css: str) -> list[tuple[str, str]]:
    return [(selector.strip(), body) for selector, body in RULE.findall(re.sub(r"/\*.*?\*/", "", css, flags=re.S))]


def test_one_shared_focus_ring_covers_views_their_focusable_parts_and_the_panels_controls():
    rules = focus_rules((FOLDER / "panels.css").read_text(encoding="utf-8"))
    assert len(rules) == 1, rules
    selector, body = rules[0]
    for covered in (".bvl-view:focus-visible", ".bvl-view [tabindex]:focus-visible", "button", "select", "input"):
        assert covered in selector, (covered, selector)
    width = re.search(r"outline:\s*(\d+(?:\.\d+)?)px solid var\(--jp-brand-color1", body)
    assert width and float(width.group(1)) >= 2, body
    assert "outline-offset" in body
    assert selector in all_css()  # what every panel's link puts in the page


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_ring_colour_reads_on_the_theme_ground(theme):
    ring, ground = theme_value(theme, "--jp-brand-color1"), theme_value(theme, "--jp-layout-color0")
    assert contrast_ratio(ring, ground) >= 3.0, (theme, ring, ground, contrast_ratio(ring, ground))

