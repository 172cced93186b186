"""Small self-contained SVG charts: the static fallback every panel puts in its mimebundle (no scripts, no CDN)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from bertviz_lab.widgets.common import escape


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def line_chart(series: dict[str, tuple[Sequence[float], Sequence[float], str]], title: str = "", width: int = 360,
               height: int = 200, log_y: bool = False) -> str:
    """Lines for {name: (x, y, colour)} with axes ticks and a legend; NaNs are skipped."""
    pad_l, pad_r, pad_t, pad_b = 48, 10, 22, 28
    xs = np.concatenate([np.asarray(x, dtype=float) for x, _, _ in series.values()] or [np.zeros(0)])
    ys = np.concatenate([np.asarray(y, dtype=float) for _, y, _ in series.values()] or [np.zeros(0)])
    finite = np.isfinite(ys) & np.isfinite(xs)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="10"><text x="{width / 2}" y="14" text-anchor="middle" font-size="12">{escape(title)}</text>']
    if not finite.any():
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#888">no data yet</text></svg>')
        return "".join(parts)
    x0, x1 = xs[finite].min(), xs[finite].max()
    y0, y1 = ys[finite].min(), ys[finite].max()
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1
    sx = lambda x: pad_l + (x - x0) / (x1 - x0) * (width - pad_l - pad_r)  # noqa: E731
    sy = lambda y: height - pad_b - (y - y0) / (y1 - y0) * (height - pad_t - pad_b)  # noqa: E731
    parts.append(f'<rect x="{pad_l}" y="{pad_t}" width="{width - pad_l - pad_r}" height="{height - pad_t - pad_b}" '
                 'fill="none" stroke="#ccc"/>')
    for value in (y0, (y0 + y1) / 2, y1):
        parts.append(f'<text x="{pad_l - 4}" y="{sy(value) + 3:.1f}" text-anchor="end">{_fmt(value)}</text>')
    for value in (x0, x1):
        parts.append(f'<text x="{sx(value):.1f}" y="{height - pad_b + 12}" text-anchor="middle">{_fmt(value)}</text>')
    for index, (name, (x, y, color)) in enumerate(series.items()):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        ok = np.isfinite(x) & np.isfinite(y)
        points = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in zip(x[ok], y[ok]))
        if points:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{points}"/>')
        parts.append(f'<text x="{pad_l + 6 + 90 * index}" y="{height - 4}" fill="{color}">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def heatmap(matrix: np.ndarray, x_labels: Sequence[str], y_labels: Sequence[str], title: str = "",
            max_cells: int = 64, cell: int = 10) -> str:
    """A square-cell heatmap (white → blue); matrices larger than max_cells per side are averaged down."""
    matrix = np.asarray(matrix, dtype=float)
    rows, cols = matrix.shape
    step_r, step_c = max(1, math.ceil(rows / max_cells)), max(1, math.ceil(cols / max_cells))
    if step_r > 1 or step_c > 1:
        pr, pc = -rows % step_r, -cols % step_c
        padded = np.pad(matrix, ((0, pr), (0, pc)), constant_values=np.nan)
        matrix = np.nanmean(padded.reshape(padded.shape[0] // step_r, step_r, padded.shape[1] // step_c, step_c), axis=(1, 3))
        x_labels, y_labels = list(x_labels)[::step_c], list(y_labels)[::step_r]
    top = float(np.nanmax(matrix)) if matrix.size and np.isfinite(matrix).any() else 1.0
    top = top or 1.0
    label_w = 80
    h, w = matrix.shape
    width, height = label_w + w * cell + 10, 20 + label_w + h * cell
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" '
             f'font-size="8"><text x="4" y="12" font-size="11" font-family="sans-serif">{escape(title)}</text>']
    for c, label in enumerate(x_labels[:w]):
        x = label_w + c * cell + cell / 2
        parts.append(f'<text transform="translate({x:.1f},{16 + label_w}) rotate(-60)">{escape(label)}</text>')
    for r in range(h):
        y = 20 + label_w + r * cell
        if r < len(y_labels):
            parts.append(f'<text x="{label_w - 2}" y="{y + cell - 2}" text-anchor="end">{escape(y_labels[r])}</text>')
        for c in range(w):
            value = matrix[r, c]
            shade = 0.0 if not np.isfinite(value) else max(0.0, min(1.0, value / top))
            red, green = int(255 - 225 * shade), int(255 - 155 * shade)
            parts.append(f'<rect x="{label_w + c * cell}" y="{y}" width="{cell}" height="{cell}" '
                         f'fill="rgb({red},{green},255)"><title>{escape(y_labels[r] if r < len(y_labels) else r)} → '
                         f'{escape(x_labels[c] if c < len(x_labels) else c)}: {value:.3f}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)
