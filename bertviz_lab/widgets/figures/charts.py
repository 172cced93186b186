"""Small self-contained SVG charts (lines, grids of charts, tables): pure drawings, no scripts, no network.

Every chart follows the figures' contract: one SVG document whose root is `bvl-fig`, a `bvl-ground` first, text
coloured by the theme's stylesheet (figure.css, charts.css), rules and grid lines by class. Only the series carry
colours of their own, and each series also has its own dash pattern or marker, so a chart reads without colour.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Mapping, Sequence

import numpy as np

from bertviz_lab.widgets.figures.export import svg_size
from bertviz_lab.widgets.figures.text import escape, text_width

MARKERS = ("", "circle", "square", "triangle")
MAX_MARKERS = 24  # per series: enough to tell the series apart, few enough to keep the line readable
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 62, 12, 26, 56


@dataclasses.dataclass(frozen=True)
class Line:
    """One series of a line chart: its points, colour, dash pattern ('' solid, else an SVG dasharray), marker, and
    the key the live view knows it by (written into the drawing as data-key)."""

    x: Sequence[float] | np.ndarray
    y: Sequence[float] | np.ndarray
    color: str
    dash: str = ""
    marker: str = ""
    key: str = ""

    def __post_init__(self) -> None:
        if self.marker not in MARKERS:
            raise ValueError(f"marker must be one of {MARKERS}, got {self.marker!r}")


def as_line(spec: Line | tuple) -> Line:
    """A Line from a Line or an (x, y, colour[, dashed]) tuple (dashed: True for the usual 5,3 dashes)."""
    if isinstance(spec, Line):
        return spec
    dashed = spec[3] if len(spec) > 3 else ""
    return Line(spec[0], spec[1], spec[2], "5,3" if dashed is True else str(dashed or ""))


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def _num(value: float) -> str:
    """A number for a data- attribute: exact enough for the live view to map pixels back to data."""
    return f"{value:.10g}"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    if not math.isfinite(high - low):  # ends near the float limit (±1e308): their span overflows, so the ends alone
        return [low, high]
    return ticks_at(low, high, nice_step(high - low, count))


def nice_step(span: float, count: int) -> float:
    """The round step (1, 2 or 5 times a power of ten) that cuts `span` into at most about `count` parts."""
    raw = span / max(1, count)
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def ticks_at(low: float, high: float, step: float) -> list[float]:
    """The multiples of `step` in [low, high]."""
    first = math.ceil(low / step - 1e-9) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]


def nice_axis(low: float, high: float, count: int) -> tuple[float, float, list[float]]:
    """(low, high, ticks) of an axis that ends on ticks: [low, high] widened to the multiples of a round step, so no
    value lies beyond the outermost tick (left as is, with nice_ticks, where the span is not finite)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low or not math.isfinite(high - low):
        return low, high, nice_ticks(low, high, count)
    step = nice_step(high - low, count)
    low = max(math.floor(low / step + 1e-9) * step, -sys.float_info.max)  # kept inside the floats near ±1e308
    high = min(math.ceil(high / step - 1e-9) * step, sys.float_info.max)
    return low, high, ticks_at(low, high, step)


def svg_open(width: float, height: float, name: str, font_size: int | None = 11) -> str:
    """The root of a figure (`bvl-fig bvl-<name>`, sized in pixels) and its themed ground; font_size None leaves
    the text size to each text."""
    size = f' font-size="{font_size}"' if font_size is not None else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="bvl-fig bvl-{name}" width="{width:g}" '
            f'height="{height:g}" viewBox="0 0 {width:g} {height:g}"{size}>'
            '<rect class="bvl-ground" width="100%" height="100%"/>')


def marker_path(marker: str, points: np.ndarray, size: float = 3.5) -> str:
    """The path data of one marker shape at each (x, y) pixel point."""
    shapes = {"circle": lambda x, y: f"M{x - size:.1f},{y:.1f}a{size:g},{size:g} 0 1,0 {2 * size:g},0"
                                     f"a{size:g},{size:g} 0 1,0 {-2 * size:g},0z",
              "square": lambda x, y: f"M{x - size:.1f},{y - size:.1f}h{2 * size:g}v{2 * size:g}h{-2 * size:g}z",
              "triangle": lambda x, y: f"M{x:.1f},{y - size:.1f}l{size:g},{1.8 * size:g}h{-2 * size:g}z"}
    if marker not in shapes:
        raise ValueError(f"marker must be one of {tuple(shapes)}, got {marker!r}")
    return "".join(shapes[marker](float(x), float(y)) for x, y in points)


def _marked(count: int) -> np.ndarray:
    """Indices of at most MAX_MARKERS evenly spaced points of a series (its first and last included)."""
    if count <= MAX_MARKERS:
        return np.arange(count)
    return np.unique(np.linspace(0, count - 1, MAX_MARKERS).round().astype(int))


def _legend_entry(x: float, y: float, name: str, line: Line) -> tuple[str, float]:
    """A legend's sample of a series (its colour, dashes and marker) and its name; returns the entry's width."""
    dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
    part = (f'<g class="bvl-legend-entry"><line x1="{x:g}" x2="{x + 22:g}" y1="{y - 4:g}" y2="{y - 4:g}" '
            f'stroke="{line.color}" stroke-width="2"{dash}/>')
    if line.marker:
        part += f'<path fill="{line.color}" d="{marker_path(line.marker, np.array([[x + 11, y - 4]]), 3)}"/>'
    part += f'<text x="{x + 26:g}" y="{y:g}" class="bvl-legend">{escape(name)}</text></g>'
    return part, 34 + text_width(name, 11)


def line_chart(series: Mapping[str, Line | tuple], title: str = "", width: int = 360, height: int = 220,
               log_y: bool = False, x_title: str = "", y_title: str = "",
               x_range: tuple[float, float] | None = None) -> str:
    """Lines for {legend name: Line} with ticks, axis titles and a legend; NaNs are skipped.

    log_y draws the y axis in powers of ten (values <= 0 skipped); x_range fixes the x axis (e.g. 0 to the last
    step of a run) instead of fitting it to the data. The plot's frame (class bvl-plot) carries its data ranges
    (data-x0, data-x1, data-y0, data-y1, data-log-y) and its series' keys (data-keys), and its x, y, width and height
    are the plot's pixel box, so a live view maps a pointer to data without the kernel.
    """
    plot_w, plot_h = width - PAD_LEFT - PAD_RIGHT, height - PAD_TOP - PAD_BOTTOM
    clean: dict[str, tuple[np.ndarray, np.ndarray, Line]] = {}
    for name, spec in series.items():
        line = as_line(spec)
        x, y = np.asarray(line.x, dtype=float), np.asarray(line.y, dtype=float)
        if log_y:
            y = np.where(y > 0, np.log10(np.where(y > 0, y, 1.0)), np.nan)
        ok = np.isfinite(x) & np.isfinite(y)
        clean[name] = (x[ok], y[ok], line)
    parts = [svg_open(width, height, "chart"),
             f'<text class="bvl-chart-title" x="{width / 2:g}" y="16" text-anchor="middle" font-size="13" '
             f'font-weight="bold">{escape(title)}</text>']
    if x_title:
        parts.append(f'<text x="{PAD_LEFT + plot_w / 2:g}" y="{height - 22}" text-anchor="middle" '
                     f'class="bvl-axis-title">{escape(x_title)}</text>')
    if y_title:
        parts.append(f'<text transform="translate(14,{PAD_TOP + plot_h / 2:g}) rotate(-90)" text-anchor="middle" '
                     f'class="bvl-axis-title">{escape(y_title)}</text>')
    legend_x, legend_parts = float(PAD_LEFT), []
    for name, (_, _, line) in clean.items():  # the legend names every series, drawn or not yet
        part, used = _legend_entry(legend_x, height - 4, name, line)
        legend_parts.append(part)
        legend_x += used
    xs = np.concatenate([c[0] for c in clean.values()] or [np.zeros(0)])
    ys = np.concatenate([c[1] for c in clean.values()] or [np.zeros(0)])
    keys = " ".join(line.key for _, _, line in clean.values() if line.key)
    frame = (f'<rect class="bvl-rule bvl-plot" x="{PAD_LEFT}" y="{PAD_TOP}" width="{plot_w}" height="{plot_h}" '
             f'data-keys="{escape(keys)}" data-log-y="{int(log_y)}"')
    if not len(xs):
        parts += [frame + "/>", *legend_parts,
                  f'<text class="bvl-muted" x="{PAD_LEFT + plot_w / 2:g}" y="{PAD_TOP + plot_h / 2:g}" '
                  'text-anchor="middle">no data yet</text></svg>']
        return "".join(parts)
    x0, x1 = (float(x_range[0]), float(x_range[1])) if x_range is not None else (float(xs.min()), float(xs.max()))
    x0, x1 = min(x0, float(xs.min())), max(x1, float(xs.max()))
    y0, y1 = float(ys.min()), float(ys.max())
    if x1 == x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    if y1 == y0:  # one value: a margin around it, kept inside the floats (a value near ±1e308 would overflow)
        y0 = max(y0 - (abs(y0) * 0.1 or 0.5), -sys.float_info.max)
        y1 = min(y1 + (abs(y1) * 0.1 or 0.5), sys.float_info.max)
    y0, y1, y_ticks = nice_axis(y0, y1, 4)

    # halves: exactly the same fractions, and no overflow where the data reach the float limit (x1 - x0 = inf)
    def sx(x):
        return PAD_LEFT + (x / 2 - x0 / 2) / (x1 / 2 - x0 / 2) * plot_w

    def sy(y):
        return PAD_TOP + plot_h - (y / 2 - y0 / 2) / (y1 / 2 - y0 / 2) * plot_h

    for value in y_ticks:
        label = f"1e{value:g}" if log_y else _fmt(value)
        parts.append(f'<line class="bvl-grid" x1="{PAD_LEFT}" x2="{PAD_LEFT + plot_w}" y1="{sy(value):.1f}" '
                     f'y2="{sy(value):.1f}"/><text class="bvl-tick bvl-muted" x="{PAD_LEFT - 4}" '
                     f'y="{sy(value) + 4:.1f}" text-anchor="end">{label}</text>')
    for value in nice_ticks(x0, x1, 5):
        parts.append(f'<line class="bvl-rule" x1="{sx(value):.1f}" x2="{sx(value):.1f}" y1="{PAD_TOP + plot_h}" '
                     f'y2="{PAD_TOP + plot_h + 3}"/><text class="bvl-tick bvl-muted" x="{sx(value):.1f}" '
                     f'y="{PAD_TOP + plot_h + 14}" text-anchor="middle">{_fmt(value)}</text>')
    parts.append(frame + f' data-x0="{_num(x0)}" data-x1="{_num(x1)}" data-y0="{_num(y0)}" data-y1="{_num(y1)}"/>')
    for name, (x, y, line) in clean.items():
        if not len(x):
            continue
        pixels = np.column_stack([sx(x), sy(y)])
        points = ("%.1f,%.1f " * len(x) % tuple(pixels.ravel().tolist())).rstrip()  # one call, not one per point
        dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
        key = f' data-key="{escape(line.key)}"' if line.key else ""
        parts.append(f'<polyline class="bvl-series" fill="none" stroke="{line.color}" stroke-width="1.6"{dash}{key} '
                     f'data-n="{len(x)}" points="{points}"/>')
        if line.marker:
            parts.append(f'<path class="bvl-markers" fill="{line.color}"{key} '
                         f'd="{marker_path(line.marker, pixels[_marked(len(x))])}"/>')
    parts += legend_parts
    parts.append("</svg>")
    return "".join(parts)




def chart_grid(charts: Sequence[str], columns: int = 2, title: str = "", subtitle: str = "", gap: int = 8) -> str:
    """Several standalone SVG charts side by side in one SVG document (nested <svg> elements), under a title."""
    sizes = [svg_size(chart) for chart in charts]
    cell_w = max((w for w, _ in sizes), default=0)
    cell_h = max((h for _, h in sizes), default=0)
    top = (22 if title else 0) + (18 if subtitle else 0) + (6 if title or subtitle else 0)
    rows = math.ceil(len(charts) / columns) if charts else 0
    width = math.ceil(columns * cell_w + (columns - 1) * gap)
    height = math.ceil(top + rows * cell_h + max(0, rows - 1) * gap)
    parts = [svg_open(width, height, "chart-grid", 12)]
    if title:
        parts.append(f'<text class="bvl-title" x="8" y="18" font-size="15" font-weight="bold">{escape(title)}</text>')
    if subtitle:
        parts.append(f'<text class="bvl-subtitle bvl-muted" x="8" y="{(22 if title else 0) + 14}">'
                     f"{escape(subtitle)}</text>")
    for index, chart in enumerate(charts):
        x, y = (index % columns) * (cell_w + gap), top + (index // columns) * (cell_h + gap)
        parts.append(chart.replace("<svg ", f'<svg x="{x:g}" y="{y:g}" data-chart="{index}" ', 1))
    parts.append("</svg>")
    return "".join(parts)


def stacked(charts: Sequence[str], gap: int = 8) -> str:
    """Standalone SVG drawings one under another, each at its own height, in one SVG document (nested <svg>
    elements, as chart_grid places them): a panel's figures on screen as one export."""
    sizes = [svg_size(chart) for chart in charts]
    width = math.ceil(max((w for w, _ in sizes), default=0))
    height = math.ceil(sum(h for _, h in sizes) + gap * max(0, len(charts) - 1))
    parts, y = [svg_open(width, height, "stacked", 12)], 0.0
    for index, (chart, (_, chart_h)) in enumerate(zip(charts, sizes)):
        parts.append(chart.replace("<svg ", f'<svg x="0" y="{y:g}" data-chart="{index}" ', 1))
        y += chart_h + gap
    parts.append("</svg>")
    return "".join(parts)


def table_svg(headers: Sequence[str], rows: Sequence[Sequence], title: str = "", font_size: int = 12) -> str:
    """A plain table as SVG: a bold header row on a band, one text row per entry, columns as wide as their cells."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(text_width(row[i], font_size) for row in cells if i < len(row)) + 16 for i in range(len(headers))]
    row_h, top = font_size + 10, (font_size + 16 if title else 4)
    width = math.ceil(max(sum(widths), text_width(title, font_size + 2) + 16) + 8)
    height = top + row_h * len(cells) + 6
    parts = [svg_open(width, height, "table", font_size)]
    if title:
        parts.append(f'<text class="bvl-title" x="4" y="{font_size + 4}" font-size="{font_size + 2}" '
                     f'font-weight="bold">{escape(title)}</text>')
    for r, row in enumerate(cells):
        y = top + r * row_h
        if r == 0:
            parts.append(f'<rect class="bvl-band" x="4" y="{y}" width="{sum(widths):g}" height="{row_h}"/>')
        parts.append(f'<line class="bvl-grid" x1="4" x2="{4 + sum(widths):g}" y1="{y + row_h}" y2="{y + row_h}"/>')
        x = 4.0
        for c, text in enumerate(row):
            weight = ' font-weight="bold"' if r == 0 else ""
            parts.append(f'<text x="{x + 8:g}" y="{y + row_h - 7}"{weight}>{escape(text)}</text>')
            x += widths[c]
    parts.append("</svg>")
    return "".join(parts)
