"""A panel's figure as a file for a paper: SVG as drawn (vector, text as text), PNG rasterised without a browser.

PNG goes through resvg (the `resvg-py` wheel: a maintained Rust SVG renderer with no system libraries, unlike
cairosvg's Cairo; no Chromium or kaleido needed). It is given only the fonts shipped in figures/fonts (DejaVu Sans,
Sans Bold and Sans Mono), never the system's, so a PNG looks the same on every machine.

An export is in an explicit theme: the view's stylesheet, its theme variables resolved to light or dark colours
(theme.py), goes into the file as a <style> element.
"""

from __future__ import annotations

import re
from pathlib import Path

from bertviz_lab.widgets.figures.theme import background, check_theme, resolve, with_style

FORMATS = ("svg", "png")
FONTS = Path(__file__).with_name("fonts")
SANS, MONO = "DejaVu Sans", "DejaVu Sans Mono"  # the families of the shipped files: what a PNG's text is drawn in
_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="([\d.]+)"[^>]*?\bheight="([\d.]+)"', re.S)


def svg_size(svg: str) -> tuple[float, float]:
    """The (width, height) the root <svg> element declares, in pixels."""
    found = _SIZE.search(svg)
    if found is None:
        raise ValueError("the figure's <svg> element has no width and height attributes")
    return float(found.group(1)), float(found.group(2))


def font_files() -> list[str]:
    """The shipped font files PNG export draws with."""
    return sorted(str(path) for path in FONTS.glob("*.ttf"))


def svg_to_png(svg: str, scale: float = 1, ground: str = "#ffffff") -> bytes:
    """PNG bytes of an SVG document, `scale` times its declared size, on `ground`, in the shipped fonts only."""
    import resvg_py

    if not scale > 0:
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    width, height = svg_size(svg)
    return bytes(resvg_py.svg_to_bytes(
        svg_string=svg, width=round(width * scale), height=round(height * scale), background=ground,
        skip_system_fonts=True, font_files=font_files(), font_family=SANS, sans_serif_family=SANS,
        serif_family=SANS, monospace_family=MONO))


def scaled_svg(svg: str, scale: float) -> str:
    """The same drawing declared `scale` times as large (a viewBox keeps the coordinates)."""
    if scale == 1:
        return svg
    if not scale > 0:
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    width, height = svg_size(svg)
    end = svg.index(">", svg.index("<svg")) + 1
    root = re.sub(r'\bwidth="[\d.]+"', f'width="{width * scale:g}"', svg[:end], count=1)
    root = re.sub(r'\bheight="[\d.]+"', f'height="{height * scale:g}"', root, count=1)
    if "viewBox" not in root:
        root = root.replace("<svg ", f'<svg viewBox="0 0 {width:g} {height:g}" ', 1)
    return root + svg[end:]


def themed(svg: str, css: str, theme: str) -> str:
    """The figure with its stylesheet resolved to `theme` inside it: a file that needs no page around it."""
    return with_style(svg, resolve(css, theme))


def save_figure(svg: str, path: str | Path, scale: float = 1, theme: str = "light", css: str = "") -> Path:
    """Write an SVG document to `path` as SVG or PNG, chosen by its suffix, in `theme` (light or dark)."""
    path = Path(path)
    kind = path.suffix.lower().lstrip(".")
    if kind not in FORMATS:
        raise ValueError(f"cannot save a figure as {path.name!r}: the file name must end in .svg or .png")
    svg = themed(svg, css, check_theme(theme))
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "svg":
        path.write_text(scaled_svg(svg, scale), encoding="utf-8")
    else:
        path.write_bytes(svg_to_png(svg, scale, background(theme)))
    return path
