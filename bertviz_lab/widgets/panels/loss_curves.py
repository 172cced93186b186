"""LossCurves: live MLM/NSP losses, accuracies and learning rate while a Trainer runs (a Trainer callback).

The figure is drawn here, once per redraw (figures/charts.py), and the browser view (views/loss_curves.js) shows that
same drawing, so the live view, the notebook's static copy and save() hold one picture. The view also holds the
series as float32 (x, y) arrays, so hovering shows the values at a step without asking the kernel; unlike plotly's
FigureWidget it redraws after a page reload or in a second tab, and a saved notebook carries no plotting script.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import ipywidgets as widgets
import numpy as np

from bertviz_lab.util.files import write_atomically
from bertviz_lab.widgets.figures.charts import Line, chart_grid, line_chart
from bertviz_lab.widgets.figures.export import themed
from bertviz_lab.widgets.figures.palette import CURVE_COLORS
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.panel import Panel
from bertviz_lab.widgets.views.curves import KEYS, CurvesView
from bertviz_lab.widgets.views.front_end import all_css

# (chart, metric key, legend name, colour, dash pattern, marker): series that share a chart differ by dashes or marker
# as well as by colour, so they read in print and for readers who do not tell the colours apart
SERIES = (
    (0, "train_mlm_loss", "train MLM", CURVE_COLORS["mlm"], "", ""),
    (0, "eval_mlm_loss", "eval MLM", CURVE_COLORS["mlm"], "5,3", "circle"),
    (1, "train_nsp_loss", "train NSP", CURVE_COLORS["nsp"], "", ""),
    (1, "eval_nsp_loss", "eval NSP", CURVE_COLORS["nsp"], "5,3", "circle"),
    (2, "eval_mlm_accuracy", "eval MLM acc", CURVE_COLORS["mlm_accuracy"], "6,3", "circle"),
    (2, "eval_nsp_accuracy", "eval NSP acc", CURVE_COLORS["nsp_accuracy"], "2,2", "square"),
    (3, "lr", "learning rate", CURVE_COLORS["lr"], "", ""),
)

SHOWN = ("step", *KEYS)
# (chart title, y axis title); every x axis is the optimizer step
CHARTS = (("MLM loss", "loss"), ("NSP loss", "loss"), ("accuracy", "accuracy"), ("learning rate", "learning rate"))
X_TITLE = "step"
DRAWN_POINTS = 400  # per series in the figure: a chart is ~350 px wide (hover reads up to max_points)
STATIC_INTERVAL = 2.0  # seconds between static-copy updates while a run goes (its end is always drawn)
CHART_WIDTH, CHART_HEIGHT = 420, 250


def shown_values(record: Any) -> dict[str, Any]:
    """The step and the drawn metrics of a record (a mapping or an object): cheaper than a whole copy per step."""
    if isinstance(record, dict):
        return {key: record.get(key) for key in SHOWN}
    if dataclasses.is_dataclass(record) or not isinstance(record, Mapping):  # the Trainer's MetricsRecord
        return {key: getattr(record, key, None) for key in SHOWN}
    return {key: record.get(key) for key in SHOWN}


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


def series_names() -> dict[str, str]:
    """Each series' legend name by metric key: what the browser's hover box calls them (sent once)."""
    return {key: name for _, key, name, *_ in SERIES}


def curves_figure(points: Mapping[str, tuple[np.ndarray, np.ndarray]], title: str, status: str,
                  total_steps: int | None = None) -> str:
    """The four charts (titles, axis titles, legends) under the run's title and status line, as one SVG document;
    the x axes reach `total_steps` when the run's length is known."""
    x_range = (0.0, float(total_steps)) if total_steps else None
    charts = []
    for index, (chart_title, y_title) in enumerate(CHARTS):
        lines = {name: Line(*points[key], color, dash, marker, key)
                 for chart, key, name, color, dash, marker in SERIES if chart == index}
        charts.append(line_chart(lines, chart_title, width=CHART_WIDTH, height=CHART_HEIGHT, x_title=X_TITLE,
                                 y_title=y_title, x_range=x_range))
    return chart_grid(charts, columns=2, title=title, subtitle=status)


FLOAT32_MAX = float(np.finfo(np.float32).max)


def pack(x: np.ndarray, y: np.ndarray) -> bytes:
    """(x, y) as interleaved float32 pairs: what the browser view reads. A value beyond float32's range (a loss of
    1e308 from a diverged run, an infinity) is kept at that range's edge, ±3.4e38, so it is drawn at the top or bottom
    of its chart instead of breaking it; NaN stays NaN (a gap)."""
    pairs = np.stack([x, y], axis=1).astype(np.float64)
    return np.clip(pairs, -FLOAT32_MAX, FLOAT32_MAX).astype(np.float32).tobytes()


def unpack(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The (x, y) arrays of pack()."""
    pairs = np.frombuffer(data, dtype=np.float32).reshape(-1, 2)
    return pairs[:, 0].astype(float), pairs[:, 1].astype(float)


class LossCurves(Panel):
    """Call it with each step's metrics; it redraws at most every `min_interval` seconds (flush() forces one)."""

    def __init__(self, trainer: Any = None, min_interval: float = 0.5, max_points: int = 1000,
                 title: str = "pretraining") -> None:
        self.min_interval, self.max_points, self.title = min_interval, max_points, title
        self.history: dict[str, list[tuple[float, float]]] = {key: [] for key in KEYS}
        self.records = 0
        self.redraws = 0
        self._last_draw = float("-inf")  # the first record draws at once
        self._last_values: dict[str, Any] = {}
        self._state = ""  # "training", or how the last run ended ("finished", "stopped", ...)
        self._lock = threading.Lock()  # guards history and the pending timer
        self._draw_lock = threading.Lock()  # one redraw at a time (the timer thread and the training thread)
        self._pending: threading.Timer | None = None  # draws the last records when no further step comes
        self._drawn_records = 0
        self._drawn = [0] * len(KEYS)  # points of each series at the last redraw (histories only grow)
        self._static_at = float("-inf")  # when the static copy last followed (at most every STATIC_INTERVAL)
        self.on_redraw: list[Callable[[], None]] = []  # e.g. the Training tab, whose figure these curves are
        self.chart = CurvesView(names=series_names())
        self.status = widgets.HTML("waiting for the first step")
        self.status.add_class("bvl-curves-status")
        self.stop_button = widgets.Button(description="Stop", icon="stop", button_style="danger",
                                          layout=widgets.Layout(display="none"))
        self.stop_button.on_click(lambda _: self._stop())
        self.export = ExportBar(self, "loss-curves")
        self.trainer = None
        toolbar = widgets.HBox([self.stop_button, self.status, self.export],
                               layout=widgets.Layout(align_items="center", justify_content="space-between"))
        toolbar.add_class("bvl-toolbar")
        super().__init__([toolbar, self.chart])
        if trainer is not None:
            self.attach(trainer)
        else:
            self.chart.svg = self.figure()

    @property
    def total_steps(self) -> int | None:
        """The run's last step, when a trainer is attached."""
        steps = getattr(getattr(self.trainer, "config", None), "max_steps", None)
        return steps if isinstance(steps, int) and steps > 0 else None

    def attach(self, trainer: Any) -> "LossCurves":
        """Register as the trainer's callback; while it trains in the background (start()), a Stop button shows.
        Curves that hold nothing yet take the steps the trainer has already run (a run resumed from a checkpoint
        carries its history), so they show the whole run, not only what comes after."""
        self.trainer = trainer
        if self not in trainer.callbacks:
            trainer.callbacks.append(self)
        earlier = list(getattr(trainer, "history", None) or [])
        if earlier and not self.records:
            with self._lock:
                for record in earlier:
                    self._store(shown_values(record))
            self.flush()
        else:
            with self._draw_lock:
                self.chart.svg = self.figure()  # the x axes now reach the run's last step
        return self

    def reset(self) -> None:
        """Forget every record and let go of the trainer: a fresh run's curves start empty at step 0."""
        with self._draw_lock:
            with self._lock:
                if self._pending is not None:
                    self._pending.cancel()
                    self._pending = None
                self.history = {key: [] for key in KEYS}
                self.records = self._drawn_records = 0
                self._drawn = [0] * len(KEYS)
                self._last_values, self._state = {}, ""
            if self.trainer is not None and self in self.trainer.callbacks:
                self.trainer.callbacks.remove(self)
            self.trainer = None
            self.stop_button.layout.display = "none"
            figure = self.figure()
            with self.chart.hold_sync():  # one message
                for key in KEYS:
                    setattr(self.chart, key, b"")
                self.chart.svg = figure
            self.status.value = escape(self.status_text())
        self.figure_changed()

    def on_train_end(self, trainer: Any) -> None:
        """Trainer hook: hide the Stop button, redraw the last records and say how the run ended."""
        self.stop_button.layout.display = "none"
        self._state = trainer.stop_reason or "ended"
        self.flush()

    def _stop(self) -> None:
        if self.trainer is not None:
            self.trainer.stop(wait=False)
            self.status.value = "stopping after the current step…"

    def __call__(self, record: Any) -> None:
        """Trainer callback: store the record, redraw when the last redraw is old enough."""
        values = shown_values(record)
        if self.trainer is not None and self.stop_button.layout.display == "none" and self.trainer.is_running:
            self.stop_button.layout.display = None  # a background run: the notebook can click Stop
        self._state = "training"
        with self._lock:
            self._store(values)
            due = time.monotonic() - self._last_draw >= self.min_interval
            if not due:
                self._schedule_trailing()
        if due:  # drawn here, between two steps: a redraw never competes with a step's threads
            with self._draw_lock:
                self._draw(final=False)

    def _store(self, values: dict[str, Any]) -> None:
        """Keep one step's shown values (call with the lock held)."""
        step = float(self.records if values["step"] is None else values["step"])
        self.records += 1
        for key, points in self.history.items():
            value = values[key]
            if value is not None and math.isfinite(value):
                points.append((step, float(value)))
        self._last_values = values

    def _schedule_trailing(self) -> None:
        """A timer that draws the last records once the run pauses or ends (call with the lock held)."""
        if self._pending is None:
            delay = max(self._last_draw + 2 * self.min_interval - time.monotonic(), 0.05)
            self._pending = threading.Timer(delay, self._trailing)
            self._pending.daemon = True
            self._pending.start()

    def _trailing(self) -> None:
        """While steps keep coming the training thread draws and this only looks; after the last one it draws."""
        with self._lock:
            self._pending = None
            undrawn = self._drawn_records != self.records
            if undrawn and time.monotonic() - self._last_draw < self.min_interval:
                self._schedule_trailing()
                return
        if undrawn:
            self.flush()

    def flush(self) -> None:
        """Redraw now with everything received so far (the static copy follows too)."""
        with self._draw_lock:
            self._draw(final=True)

    def _draw(self, final: bool) -> None:
        """Send the figure, the series that grew and the status line in one message; the static copy follows on
        `final` draws (a run's end, a pause) and otherwise at most every STATIC_INTERVAL seconds: it is for when
        the kernel is gone."""
        with self._lock:
            self._drawn_records = self.records
            counts = [len(self.history[key]) for key in KEYS]
            grown = {key: downsample_points(self.history[key], self.max_points)
                     for key, count, drawn in zip(KEYS, counts, self._drawn) if count != drawn}
            figure = self.figure(locked=True)
        self._drawn = counts
        with self.chart.hold_sync():  # one message
            for key, (x, y) in grown.items():
                setattr(self.chart, key, pack(x, y))
            self.chart.svg = figure
        self.status.value = escape(self.status_text())
        self._last_draw = now = time.monotonic()
        self.redraws += 1
        if final or now - self._static_at >= STATIC_INTERVAL:
            self._static_at = now
            self.figure_changed()
            for callback in self.on_redraw:
                callback()

    def status_text(self) -> str:
        """'step 171 of 300 · stopped · train MLM 4.2 · …': where the run is, how it goes, the latest values."""
        values = self._last_values
        if not values:
            return "waiting for the first step"
        total = self.total_steps
        step = self.records if values.get("step") is None else values["step"]
        parts = [f"step {step}" + (f" of {total}" if total else "")]
        if self._state:
            parts.append(self._state)
        parts += [f"{name} {values[key]:.4g}" for _, key, name, *_ in SERIES
                  if isinstance(values.get(key), (int, float))]
        return " · ".join(parts)

    def drawn(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """The (x, y) points of one series as the browser view has them."""
        data = getattr(self.chart, key)
        return unpack(data) if data else (np.zeros(0), np.zeros(0))

    def figure(self, max_points: int | None = None, locked: bool = False) -> str:
        """The curves drawn now from everything received (at most `max_points` per series, DRAWN_POINTS by default);
        `locked`: the caller holds the history's lock."""
        max_points = max_points or min(self.max_points, DRAWN_POINTS)
        if not locked:
            with self._lock:  # the training thread appends meanwhile
                return self.figure(max_points, locked=True)
        points = {key: downsample_points(self.history[key], max_points) for key in KEYS}
        return curves_figure(points, self.title, self.status_text(), self.total_steps)

    def to_plotly(self) -> Any:
        """The four charts as a plotly Figure: every point received (at most max_points a series, the latest always
        kept), the same series names, colours and dashes, titles and axis titles."""
        from bertviz_lab.widgets.figures.plotly_figures import curves_figure

        with self._lock:
            points = {key: downsample_points(self.history[key], self.max_points) for key in KEYS}
            status = self.status_text()
        return curves_figure(points, SERIES, CHARTS, self.title, status, X_TITLE)

    def to_svg(self) -> str:
        """The figure on screen: the four charts with titles, axis titles and legends, under the run's title and
        status line (what the live view shows; flush() draws the latest records)."""
        return self.chart.svg

    def to_html(self, path: str | Path, theme: str = "light") -> Path:
        """Write the curves to a self-contained HTML page (the figure on screen in `theme`, no scripts, nothing
        fetched), after drawing the latest records."""
        self.flush()
        path = Path(path)
        return write_atomically(path, f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(self.title)}"
                                      f"</title></head><body>{themed(self.to_svg(), all_css(), theme)}</body></html>")
