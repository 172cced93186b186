"""LossCurves: live MLM/NSP losses, accuracies and learning rate while a Trainer runs (a Trainer callback)."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, Mapping

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertviz_lab.widgets.common import PLOT_TEMPLATE, Panel, escape
from bertviz_lab.widgets.svg import line_chart

# (subplot row, col, metric key, legend name, colour, dashed)
SERIES = (
    (1, 1, "train_mlm_loss", "train MLM", "#1f77b4", False),
    (1, 1, "eval_mlm_loss", "eval MLM", "#1f77b4", True),
    (1, 2, "train_nsp_loss", "train NSP", "#ff7f0e", False),
    (1, 2, "eval_nsp_loss", "eval NSP", "#ff7f0e", True),
    (2, 1, "eval_mlm_accuracy", "eval MLM acc", "#2ca02c", True),
    (2, 1, "eval_nsp_accuracy", "eval NSP acc", "#d62728", True),
    (2, 2, "lr", "learning rate", "#7f7f7f", False),
)
TITLES = ("MLM loss", "NSP loss", "accuracy", "learning rate")


def record_to_dict(record: Any) -> dict[str, Any]:
    """Accept the Trainer's record as a mapping, a dataclass or an object with attributes."""
    if isinstance(record, Mapping):
        return dict(record)
    if dataclasses.is_dataclass(record):
        return dataclasses.asdict(record)
    return dict(vars(record))


def _kept(count: int, max_points: int) -> np.ndarray:
    """Indices of at most max_points evenly spaced points out of count, always including the latest."""
    return np.unique(np.append(np.linspace(0, count - 1, max_points - 1).astype(int), count - 1))


def downsample(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most max_points evenly spaced points, always including the latest."""
    if len(x) <= max_points:
        return x, y
    index = _kept(len(x), max_points)
    return x[index], y[index]


def downsample_points(points: list[tuple[float, float]], max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """downsample() of a list of (x, y), touching only the kept points: a redraw costs O(max_points), not O(history)."""
    if len(points) > max_points:
        points = [points[i] for i in _kept(len(points), max_points)]
    return np.array([p[0] for p in points], dtype=float), np.array([p[1] for p in points], dtype=float)


class LossCurves(Panel):
    """Call it with each step's metrics; it redraws at most every `min_interval` seconds (flush() forces one)."""

    def __init__(self, trainer: Any = None, min_interval: float = 0.5, max_points: int = 1000,
                 title: str = "pretraining") -> None:
        self.min_interval, self.max_points, self.title = min_interval, max_points, title
        self.history: dict[str, list[tuple[float, float]]] = {key: [] for _, _, key, *_ in SERIES}
        self.records = 0
        self.redraws = 0
        self._last_draw = 0.0
        self._end_note = ""  # how the last run ended, shown before the latest values
        self._lock = threading.Lock()  # guards history and the pending timer
        self._draw_lock = threading.Lock()  # one redraw at a time (the timer thread and the training thread)
        self._pending: threading.Timer | None = None
        self._drawn = [0] * len(SERIES)  # points of each series at the last redraw (histories only grow)
        self.figure = make_subplots(rows=2, cols=2, subplot_titles=TITLES, horizontal_spacing=0.1,
                                    vertical_spacing=0.16, figure=go.FigureWidget(layout={"template": PLOT_TEMPLATE}))
        for row, col, key, name, color, dashed in SERIES:
            self.figure.add_trace(go.Scatter(x=[], y=[], name=name, mode="lines+markers" if dashed else "lines",
                                             line={"color": color, "dash": "dash" if dashed else "solid"}),
                                  row=row, col=col)
        self.figure.update_layout(height=420, margin={"l": 40, "r": 10, "t": 40, "b": 30}, title=escape(title),
                                  legend={"orientation": "h", "y": -0.12})
        self.status = widgets.HTML("waiting for the first step")
        self.stop_button = widgets.Button(description="Stop", icon="stop", button_style="danger",
                                          layout=widgets.Layout(display="none"))
        self.stop_button.on_click(lambda _: self._stop())
        self.trainer = None
        super().__init__([widgets.HBox([self.stop_button, self.status]), self.figure])
        if trainer is not None:
            self.attach(trainer)

    def attach(self, trainer: Any) -> "LossCurves":
        """Register as the trainer's callback; while it trains in the background (start()), a Stop button shows."""
        self.trainer = trainer
        if self not in trainer.callbacks:
            trainer.callbacks.append(self)
        return self

    def on_train_end(self, trainer: Any) -> None:
        """Trainer hook: hide the Stop button, redraw the last records and say how the run ended."""
        self.stop_button.layout.display = "none"
        self._end_note = f"{trainer.stop_reason or 'ended'} at step {trainer.step} · "
        self.flush()

    def _stop(self) -> None:
        if self.trainer is not None:
            self.trainer.stop(wait=False)
            self.status.value = "stopping after the current step…"

    def __call__(self, record: Any) -> None:
        """Trainer callback: store the record, redraw when the last redraw is old enough."""
        values = record_to_dict(record)
        if self.trainer is not None and self.trainer.is_running:  # a background run: the notebook can click Stop
            self.stop_button.layout.display = None
        self._end_note = ""
        step = float(values.get("step", self.records))
        with self._lock:
            self.records += 1
            for key, points in self.history.items():
                value = values.get(key)
                if value is not None and np.isfinite(value):
                    points.append((step, float(value)))
            self._last_values = values
            wait = self.min_interval - (time.monotonic() - self._last_draw)
            if wait > 0 and self._pending is None:  # draw the latest records soon even if no further record arrives
                self._pending = threading.Timer(wait, self.flush)
                self._pending.daemon = True
                self._pending.start()
        if wait <= 0:
            self.flush()

    def flush(self) -> None:
        """Redraw now with everything received so far."""
        with self._draw_lock:
            self._draw()

    def _draw(self) -> None:
        with self._lock:
            if self._pending is not None:
                self._pending.cancel()
                self._pending = None
            counts = [len(self.history[key]) for _, _, key, *_ in SERIES]
            # only the series that grew: plotly validates every assigned array, the main cost of a redraw
            series = {index: downsample_points(self.history[SERIES[index][2]], self.max_points)
                      for index, count in enumerate(counts) if count != self._drawn[index]}
            values = getattr(self, "_last_values", {})
        with self.figure.batch_update():
            for index, (x, y) in series.items():
                self.figure.data[index].x, self.figure.data[index].y = x, y
        self._drawn = counts
        step = values.get("step", "?")
        shown = [f"step {step}"] + [f"{name} {values[key]:.4g}" for _, _, key, name, *_ in SERIES
                                    if isinstance(values.get(key), (int, float))]
        self.status.value = self._end_note + " · ".join(shown)
        self._last_draw = time.monotonic()
        self.redraws += 1

    def static_html(self) -> str:
        charts = []
        for position, title in zip(((1, 1), (1, 2), (2, 1), (2, 2)), TITLES):
            lines = {name: (*downsample_points(self.history[key], self.max_points), color)
                     for row, col, key, name, color, _ in SERIES if (row, col) == position and self.history[key]}
            charts.append(line_chart(lines, title))
        return "<div class='bvl-loss-curves'>" + "".join(charts) + "</div>"

    def to_html(self, path: str | Path, interactive: bool = True) -> Path:
        """Write the curves to a self-contained HTML file: plotly with its script embedded, or static SVG charts."""
        self.flush()
        path = Path(path)
        if interactive:
            go.Figure(self.figure).write_html(str(path), include_plotlyjs=True, full_html=True)
        else:
            path.write_text(f"<!DOCTYPE html><html><body>{self.static_html()}</body></html>")
        return path
