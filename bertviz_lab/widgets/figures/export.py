"""A panel's figure as a file for a paper: SVG as drawn (vector, text as text), PNG rasterised without a browser.

PNG goes through resvg (the `resvg-py` wheel: a maintained Rust SVG renderer with no system libraries, unlike
cairosvg's Cairo; no Chromium or kaleido needed). It is given only the fonts shipped in figures/fonts (DejaVu Sans,
Sans Bold and Sans Mono), never the system's, so a PNG looks the same on every machine.

A scale is a finite number from MIN_SCALE to MAX_SCALE, and a PNG has at most MAX_PIXELS pixels (checked before
anything is drawn): a huge scale used to take the whole Python process down inside the rasteriser.

A caption line (figures/caption.py: the model and the text a figure shows) goes into the drawing itself, under the
figure, so the SVG and the PNG of one export say the same.

An export is in an explicit theme: the view's stylesheet, its theme variables resolved to light or dark colours
(theme.py), goes into the file as a <style> element.
"""

from __future__ import annotations

import numbers
import re
from pathlib import Path
from typing import Any

from bertviz_lab.util.files import named, shown, write_atomically
from bertviz_lab.widgets.figures.caption import with_caption
from bertviz_lab.widgets.figures.theme import background, check_theme, resolve, with_style

FORMATS = ("svg", "png")
FONTS = Path(__file__).with_name("fonts")
SANS, MONO = "DejaVu Sans", "DejaVu Sans Mono"  # the families of the shipped files: what a PNG's text is drawn in
MIN_SCALE, MAX_SCALE = 0.1, 16
MAX_PIXELS = 100_000_000  # 100 megapixels: 400 MB of RGBA in the rasteriser
_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="([\d.]+)"[^>]*?\bheight="([\d.]+)"', re.S)


def svg_size(svg: str) -> tuple[float, float]:
    """The (width, height) the root <svg> element declares, in pixels."""
    found = _SIZE.search(svg)
    if found is None:
        raise ValueError("the figure's <svg> element has no width and height attributes")
    return float(found.group(1)), float(found.group(2))


def check_scale(scale: Any) -> float:
    """`scale` as a float when it is a finite number from MIN_SCALE to MAX_SCALE; else a one-line error naming it."""
    expected = f"a number from {MIN_SCALE:g} to {MAX_SCALE:g}"
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be {expected}, got {type(scale).__name__} {shown(scale)}.")
    # typeshed's numbers.Real declares no comparisons, though every Real compares (an int too large for a float too)
    if not MIN_SCALE <= scale <= MAX_SCALE:  # type: ignore[operator]  # NaN fails both comparisons
        raise ValueError(f"scale must be {expected}, got {shown(scale)}.")
    return float(scale)


def png_size(svg: str, scale: float) -> tuple[int, int]:
    """The PNG's (width, height) in pixels, at most MAX_PIXELS of them; else a one-line error naming the scale."""
    width, height = svg_size(svg)
    pixels = max(1, round(width * scale)), max(1, round(height * scale))
    if pixels[0] * pixels[1] > MAX_PIXELS:
        largest = (MAX_PIXELS / (width * height)) ** 0.5
        raise ValueError(f"scale={scale:g} makes a {pixels[0]} x {pixels[1]} pixel PNG of this {width:g} x {height:g} "
                         f"figure, over the {MAX_PIXELS // 10**6} megapixels allowed; use scale <= {largest:.3g} "
                         f"or save as .svg.")
    return pixels


def font_files() -> list[str]:
    """The shipped font files PNG export draws with."""
    return sorted(str(path) for path in FONTS.glob("*.ttf"))


def svg_to_png(svg: str, scale: float = 1, ground: str = "#ffffff") -> bytes:
    """PNG bytes of an SVG document, `scale` times its declared size, on `ground`, in the shipped fonts only."""
    import resvg_py

    width, height = png_size(svg, check_scale(scale))
    return bytes(resvg_py.svg_to_bytes(
        svg_string=svg, width=width, height=height, background=ground,
        skip_system_fonts=True, font_files=font_files(), font_family=SANS, sans_serif_family=SANS,
        serif_family=SANS, monospace_family=MONO))


def scaled_svg(svg: str, scale: float) -> str:
    """The same drawing declared `scale` times as large (a viewBox keeps the coordinates)."""
    if check_scale(scale) == 1:
        return svg
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


def save_figure(svg: str, path: str | Path, scale: float = 1, theme: str = "light", css: str = "",
                caption: str = "") -> Path:
    """Write an SVG document to `path` as SVG or PNG, chosen by its suffix, in `theme` (light or dark), `scale`
    times its size, with `caption` as a line under the figure ("" for none)."""
    check_scale(scale)
    path = Path(path)
    kind = path.suffix.lower().lstrip(".")
    if kind not in FORMATS:
        raise ValueError(f"cannot save a figure as {path.name!r}: the file name must end in .svg or .png")
    if not isinstance(caption, str):
        raise TypeError(f"caption must be a string, got {type(caption).__name__} {shown(caption)}.")
    svg = themed(with_caption(svg, caption), css, check_theme(theme))
    data = scaled_svg(svg, scale) if kind == "svg" else svg_to_png(svg, scale, background(theme))
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "it is a folder")
        existing = next(folder for folder in path.parents if folder.exists())
        if not existing.is_dir():
            raise NotADirectoryError(20, f"{named(existing)} is a file, not a folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, data)
    except OSError as error:  # one line naming the file, of the same class (PermissionError, ...) for callers
        why = error.strerror or type(error).__name__
        raise type(error)(error.errno, f"cannot save the figure to {named(path)}: {why}") from None
    return path
