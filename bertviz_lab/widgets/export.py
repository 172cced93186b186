"""A panel's figure as a file for a paper: SVG as drawn (vector, text as text), PNG rasterised without a browser.

PNG goes through resvg (the `resvg-py` wheel: a maintained Rust SVG renderer with no system libraries, unlike
cairosvg's Cairo; no Chromium or kaleido needed). It uses the system's fonts, like any SVG viewer.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import ipywidgets as widgets

FORMATS = ("svg", "png")
EXPORT_DIR = Path("bertviz_figures")  # where a panel's export button writes, relative to the notebook
_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="([\d.]+)"[^>]*?\bheight="([\d.]+)"', re.S)


def svg_size(svg: str) -> tuple[float, float]:
    """The (width, height) the root <svg> element declares, in pixels."""
    found = _SIZE.search(svg)
    if found is None:
        raise ValueError("the figure's <svg> element has no width and height attributes")
    return float(found.group(1)), float(found.group(2))


def svg_to_png(svg: str, scale: float = 1) -> bytes:
    """PNG bytes of an SVG document, `scale` times its declared size, on a white background."""
    import resvg_py

    if not scale > 0:
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    width, height = svg_size(svg)
    return bytes(resvg_py.svg_to_bytes(svg_string=svg, width=round(width * scale), height=round(height * scale),
                                       background="#ffffff"))


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


def save_figure(svg: str, path: str | Path, scale: float = 1) -> Path:
    """Write an SVG document to `path` as SVG or PNG, chosen by its suffix."""
    path = Path(path)
    kind = path.suffix.lower().lstrip(".")
    if kind not in FORMATS:
        raise ValueError(f"cannot save a figure as {path.name!r}: the file name must end in .svg or .png")
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "svg":
        path.write_text(scaled_svg(svg, scale), encoding="utf-8")
    else:
        path.write_bytes(svg_to_png(svg, scale))
    return path


class ExportBar(widgets.HBox):
    """A format choice and an export button that saves the panel's current figure under bertviz_figures/."""

    def __init__(self, panel, name: str) -> None:
        self.panel, self.name = panel, name
        self.format = widgets.Dropdown(options=FORMATS, value="svg", description="export as",
                                       style={"description_width": "initial"}, layout=widgets.Layout(width="140px"))
        self.button = widgets.Button(description="export", icon="download", tooltip="save the figure on screen",
                                     layout=widgets.Layout(width="90px"))
        self.status = widgets.HTML()
        self.button.on_click(lambda _: self.export())
        super().__init__([self.format, self.button, self.status], layout=widgets.Layout(align_items="center"))

    def export(self) -> Path | None:
        """Save the figure on screen; the status line names the file, or says why it could not be saved."""
        from bertviz_lab.widgets.common import escape

        stamp = time.strftime("%Y%m%d-%H%M%S")
        try:
            path = self.panel.save(EXPORT_DIR / f"{self.name}-{stamp}.{self.format.value}")
        except (OSError, ValueError) as error:  # no Graphviz, an unwritable folder, a full disk: say so in place
            self.status.value = (f"<span class='bvl-export-status' style='color:#d62728'>not saved: "
                                 f"{escape(error)}</span>")
            return None
        self.status.value = f"<span class='bvl-export-status'>saved {escape(path)}</span>"
        return path
