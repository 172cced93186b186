"""Light and dark as explicit colours: the values an export gives to the theme variables the stylesheets use.

The live view and the static copy take JupyterLab's own variables (the page's theme); a file written for a paper has
no page around it, so its stylesheet is resolved here to one theme and embedded in the SVG.
"""

from __future__ import annotations

import re

THEMES: dict[str, dict[str, str]] = {
    "light": {
        "--jp-layout-color0": "#ffffff",
        "--jp-layout-color1": "#ffffff",
        "--jp-layout-color2": "#eeeeee",
        "--jp-ui-font-color1": "#1a1a1a",
        "--jp-ui-font-color2": "#595959",
        "--jp-border-color1": "#8a8a8a",
        "--jp-border-color2": "#e0e0e0",
        "--jp-error-color1": "#c62828",
        "--jp-warn-color0": "#e65100",
        "--jp-brand-color1": "#1976d2",
    },
    "dark": {
        "--jp-layout-color0": "#111111",
        "--jp-layout-color1": "#212121",
        "--jp-layout-color2": "#424242",
        "--jp-ui-font-color1": "#e6e6e6",
        "--jp-ui-font-color2": "#a8a8a8",
        "--jp-border-color1": "#7a7a7a",
        "--jp-border-color2": "#3a3a3a",
        "--jp-error-color1": "#ff7a7a",
        "--jp-warn-color0": "#ffb74d",
        "--jp-brand-color1": "#64b5f6",
    },
}
_VAR = re.compile(r"var\(\s*(--[\w-]+)\s*(?:,\s*([^()]*?))?\s*\)")


def check_theme(theme: str) -> str:
    """The theme's name, or a ValueError naming the themes there are."""
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {sorted(THEMES)}, got {theme!r}")
    return theme


def resolve(css: str, theme: str) -> str:
    """`css` with every var(--name, fallback) replaced by the theme's colour (the fallback where it has none)."""
    values = THEMES[check_theme(theme)]

    def value(match: re.Match) -> str:
        name, fallback = match.group(1), match.group(2)
        if name in values:
            return values[name]
        if fallback is None:
            raise ValueError(f"the stylesheet uses {name} with no fallback and theme {theme!r} does not set it")
        return fallback

    return _VAR.sub(value, css)


def with_style(svg: str, css: str) -> str:
    """The SVG document with `css` as a <style> element first inside its root (escaped as CSS in XML needs)."""
    css = re.sub(r"/\*.*?\*/\s*", "", css, flags=re.S).strip()
    if not css:
        return svg
    start = svg.index("<svg")
    end = svg.index(">", start) + 1
    return svg[:end] + f"<style>{css.replace('<', '&lt;').replace('>', '&gt;')}</style>" + svg[end:]


def background(theme: str) -> str:
    """The ground colour of an export in `theme`."""
    return THEMES[check_theme(theme)]["--jp-layout-color0"]
