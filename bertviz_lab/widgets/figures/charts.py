"""Small self-contained SVG charts (lines, grids of charts, tables): pure drawings, no scripts, no network."""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from bertviz_lab.widgets.figures.text import escape, text_width


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]


def _svg_open(width: float, height: float, font_size: int = 11, family: str = "sans-serif") -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}" height="{height:g}" '
            f'viewBox="0 0 {width:g} {height:g}" font-family="{family}" font-size="{font_size}">'
            f'<rect width="{width:g}" height="{height:g}" fill="white"/>')


def line_chart(series: dict[str, tuple], title: str = "", width: int = 360, height: int = 220,
               log_y: bool = False, x_title: str = "", y_title: str = "",
               x_range: tuple[float, float] | None = None) -> str:
    """Lines for {name: (x, y, colour[, dashed])} with ticks, axis titles and a legend; NaNs are skipped.

    log_y draws the y axis in powers of ten (values <= 0 skipped); x_range fixes the x axis (e.g. 0 to the last
    step of a run) instead of fitting it to the data.
    """
    pad_l, pad_r, pad_t, pad_b = 62, 12, 26, 56
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b
    clean = {}
    for name, spec in series.items():
        x, y = np.asarray(spec[0], dtype=float), np.asarray(spec[1], dtype=float)
        if log_y:
            y = np.where(y > 0, np.log10(np.where(y > 0, y, 1.0)), np.nan)
        ok = np.isfinite(x) & np.isfinite(y)
        clean[name] = (x[ok], y[ok], spec[2], bool(spec[3]) if len(spec) > 3 else False)
    parts = [_svg_open(width, height),
             f'<text x="{width / 2:g}" y="16" text-anchor="middle" font-size="13" font-weight="bold">'
             f"{escape(title)}</text>"]
    xs = np.concatenate([c[0] for c in clean.values()] or [np.zeros(0)])
    ys = np.concatenate([c[1] for c in clean.values()] or [np.zeros(0)])
    if x_title:
        parts.append(f'<text x="{pad_l + plot_w / 2:g}" y="{height - 20}" text-anchor="middle" '
                     f'class="bvl-axis-title">{escape(x_title)}</text>')
    if y_title:
        parts.append(f'<text transform="translate(14,{pad_t + plot_h / 2:g}) rotate(-90)" text-anchor="middle" '
                     f'class="bvl-axis-title">{escape(y_title)}</text>')
    parts.append(f'<rect x="{pad_l}" y="{pad_t}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#c8ccd4"/>')
    if not len(xs):
        parts.append(f'<text x="{pad_l + plot_w / 2:g}" y="{pad_t + plot_h / 2:g}" text-anchor="middle" '
                     'fill="#888">no data yet</text></svg>')
        return "".join(parts)
    x0, x1 = (float(x_range[0]), float(x_range[1])) if x_range is not None else (float(xs.min()), float(xs.max()))
    x1 = max(x1, float(xs.max()))
    y0, y1 = float(ys.min()), float(ys.max())
    if x1 == x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    if y1 == y0:
        y0, y1 = y0 - (abs(y0) * 0.1 or 0.5), y1 + (abs(y1) * 0.1 or 0.5)

    def sx(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return pad_t + plot_h - (y - y0) / (y1 - y0) * plot_h

    for value in nice_ticks(y0, y1, 4):
        label = f"1e{value:g}" if log_y else _fmt(value)
        parts.append(f'<line x1="{pad_l}" x2="{pad_l + plot_w}" y1="{sy(value):.1f}" y2="{sy(value):.1f}" '
                     f'stroke="#eef0f4"/><text x="{pad_l - 4}" y="{sy(value) + 4:.1f}" text-anchor="end">'
                     f"{label}</text>")
    for value in nice_ticks(x0, x1, 5):
        parts.append(f'<text x="{sx(value):.1f}" y="{pad_t + plot_h + 14}" text-anchor="middle">{_fmt(value)}</text>')
    legend_x = pad_l
    for name, (x, y, color, dashed) in clean.items():
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        if len(x):
            xy = np.column_stack([sx(x), sy(y)]).ravel().tolist()
            points = ("%.1f,%.1f " * len(x) % tuple(xy)).rstrip()  # one formatting call, not one per point
            parts.append(f'<polyline class="bvl-series" fill="none" stroke="{color}" stroke-width="1.6"{dash} '
                         f'points="{points}"/>')
        parts.append(f'<line x1="{legend_x}" x2="{legend_x + 16}" y1="{height - 6}" y2="{height - 6}" '
                     f'stroke="{color}" stroke-width="2"{dash}/><text x="{legend_x + 20}" y="{height - 2}" '
                     f'class="bvl-legend">{escape(name)}</text>')
        legend_x += 28 + text_width(name, 11)
    parts.append("</svg>")
    return "".join(parts)


_ROOT_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="([\d.]+)"[^>]*?\bheight="([\d.]+)"', re.S)


def chart_grid(charts: Sequence[str], columns: int = 2, title: str = "", subtitle: str = "", gap: int = 8) -> str:
    """Several standalone SVG charts side by side in one SVG document (nested <svg> elements), under a title."""
    sizes = [tuple(float(v) for v in _ROOT_SIZE.search(chart).groups()) for chart in charts]
    cell_w = max((w for w, _ in sizes), default=0)
    cell_h = max((h for _, h in sizes), default=0)
    top = (22 if title else 0) + (18 if subtitle else 0) + (6 if title or subtitle else 0)
    rows = math.ceil(len(charts) / columns) if charts else 0
    width = math.ceil(columns * cell_w + (columns - 1) * gap)
    height = math.ceil(top + rows * cell_h + max(0, rows - 1) * gap)
    parts = [_svg_open(width, height, 12)]
    if title:
        parts.append(f'<text x="8" y="18" font-size="15" font-weight="bold">{escape(title)}</text>')
    if subtitle:
        parts.append(f'<text x="8" y="{(22 if title else 0) + 14}" fill="#444" class="bvl-subtitle">'
                     f"{escape(subtitle)}</text>")
    for index, chart in enumerate(charts):
        x, y = (index % columns) * (cell_w + gap), top + (index // columns) * (cell_h + gap)
        parts.append(chart.replace("<svg ", f'<svg x="{x:g}" y="{y:g}" ', 1))
    parts.append("</svg>")
    return "".join(parts)


def table_svg(headers: Sequence[str], rows: Sequence[Sequence], title: str = "", font_size: int = 12) -> str:
    """A plain table as SVG: a bold header row, one text row per entry, columns as wide as their longest cell."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(text_width(row[i], font_size) for row in cells if i < len(row)) + 16 for i in range(len(headers))]
    row_h, top = font_size + 10, (font_size + 16 if title else 4)
    width = math.ceil(max(sum(widths), text_width(title, font_size + 2) + 16) + 8)
    height = top + row_h * len(cells) + 6
    parts = [_svg_open(width, height, font_size)]
    if title:
        parts.append(f'<text x="4" y="{font_size + 4}" font-size="{font_size + 2}" font-weight="bold">'
                     f"{escape(title)}</text>")
    for r, row in enumerate(cells):
        y = top + r * row_h
        if r == 0:
            parts.append(f'<rect x="4" y="{y}" width="{sum(widths):g}" height="{row_h}" fill="#f0f2f6"/>')
        parts.append(f'<line x1="4" x2="{4 + sum(widths):g}" y1="{y + row_h}" y2="{y + row_h}" stroke="#dde"/>')
        x = 4.0
        for c, text in enumerate(row):
            weight = ' font-weight="bold"' if r == 0 else ""
            parts.append(f'<text x="{x + 8:g}" y="{y + row_h - 7}"{weight}>{escape(text)}</text>')
            x += widths[c]
    parts.append("</svg>")
    return "".join(parts)
