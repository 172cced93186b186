"""LossCurves and TrainingPanel: every record is kept, redraws are throttled and cheap, the last state is drawn, long
histories are downsampled; they follow a real Trainer in the foreground (fit) and background (start / Stop); the live
view shows the kernel's drawing (one picture on screen, in the static copy and in exports) and hovers from its series.
"""

from __future__ import annotations

import json
import struct
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from payload import sent_messages
from widgets_testlib import assert_safe_html, parse_html, tiny_config, wait_until

from bertviz_lab.model import BERTForPreTraining
from bertviz_lab.train import (
    MetricsRecord,
    TrainConfig,
    Trainer,
    generate_synthetic_bert_batches,
    synthetic_to_training_batch,
)
from bertviz_lab.widgets import LossCurves, TrainingPanel
from bertviz_lab.widgets.figures.contrast import contrast_ratio
from bertviz_lab.widgets.figures.palette import reads_on_both_grounds
from bertviz_lab.widgets.panels.loss_curves import CHARTS, SERIES, downsample, downsample_points
from bertviz_lab.widgets.views.curves import KEYS
from bertviz_lab.widgets.views.front_end import esm

SVG_NS = "{http://www.w3.org/2000/svg}"


def record(step: int, evaluated: bool = False) -> dict:
    values = {"step": step, "train_loss": 2.0, "train_mlm_loss": 10.0 / (step + 1), "train_nsp_loss": 0.7,
              "train_mlm_accuracy": 0.1, "train_nsp_accuracy": 0.5, "lr": 1e-3 * step, "grad_norm": 1.0, "time": 0.0}
    if evaluated:
        values.update(eval_mlm_loss=1.0, eval_nsp_loss=0.6, eval_mlm_accuracy=0.2, eval_nsp_accuracy=0.6)
    return values


class Drawn:
    """One series as the browser view has it."""

    def __init__(self, curves: LossCurves, key: str) -> None:
        self.x, self.y = curves.drawn(key)


def trace_named(curves: LossCurves, key: str) -> Drawn:
    return Drawn(curves, key)


def last_x(curves: LossCurves, key: str) -> float | None:
    x, _ = curves.drawn(key)
    return float(x[-1]) if len(x) else None


def tiny_trainer(max_steps: int, eval_interval: int = 0) -> Trainer:
    torch.manual_seed(0)
    model = BERTForPreTraining(tiny_config(200, hidden_size=32, num_attention_heads=2,
                                               intermediate_size=64, num_hidden_layers=1,
                                               max_position_embeddings=64))
    batches = [synthetic_to_training_batch(b) for b in generate_synthetic_bert_batches(4, 8, 16, 200, random_seed=0)]
    config = TrainConfig(max_steps=max_steps, batch_size=8, eval_interval=eval_interval, progress=False,
                         device="cpu", log_interval=0)
    return Trainer(model, batches, batches[:1], config)


def test_curves_of_a_resumed_run_show_the_whole_run(tmp_path):
    """A trainer resumed from a checkpoint carries its history: new curves on it start with the steps before the
    checkpoint, then go on, each step once."""
    first = tiny_trainer(max_steps=20)
    first.config.checkpoint_dir = str(tmp_path)
    first.fit(8)
    checkpoint = first.save_checkpoint()
    resumed = tiny_trainer(max_steps=20)
    resumed.load_checkpoint(checkpoint)
    curves = LossCurves(resumed, min_interval=3600)
    assert curves.drawn("lr")[0].tolist() == list(range(1, 9)) and curves.records == 8
    x, y = curves.drawn("train_mlm_loss")  # steps of MLM batches only (the synthetic data mixes in NSP-only ones)
    before = [(r.step, r.train_mlm_loss) for r in first.history if r.train_mlm_loss is not None]
    assert x.tolist() == [step for step, _ in before] and len(before) >= 4
    np.testing.assert_allclose(y, [loss for _, loss in before], rtol=1e-6)  # float32 in the view
    assert "step 8 of 20" in curves.status.value
    resumed.fit(12)  # twelve more steps
    curves.flush()
    assert curves.drawn("lr")[0].tolist() == list(range(1, 21)) and curves.records == 20
    again = LossCurves(min_interval=3600)
    again(record(1))
    again.attach(resumed)  # curves that already hold steps keep theirs
    assert again.records == 1


def test_every_record_is_kept_and_redraws_are_throttled():
    curves = LossCurves(min_interval=0.3)
    started = time.monotonic()
    for step in range(1000):
        curves(record(step, evaluated=step % 100 == 99))
    elapsed = time.monotonic() - started
    assert curves.records == 1000
    assert len(curves.history["train_mlm_loss"]) == 1000 and len(curves.history["eval_nsp_loss"]) == 10
    assert curves.redraws <= 2 + elapsed / 0.3  # the first record draws at once, then at most one per interval
    # the pending timer draws the final state without any further record (every trace: the timer's thread sets them
    # one after another)
    assert wait_until(lambda: last_x(curves, "train_mlm_loss") == 999 and last_x(curves, "lr") == 999
                      and curves.status.value.startswith("step 999"), timeout=10)
    assert len(trace_named(curves, "train_mlm_loss").x) == 1000
    assert list(trace_named(curves, "eval_mlm_loss").x) == [float(s) for s in range(99, 1000, 100)]
    np.testing.assert_allclose(trace_named(curves, "lr").y, [1e-3 * s for s in range(1000)], rtol=1e-6)
    assert curves.status.value.startswith("step 999")
    assert curves.redraws <= 3 + (time.monotonic() - started) / 0.3


def test_long_histories_are_downsampled_to_max_points():
    curves = LossCurves(min_interval=3600, max_points=100)
    for step in range(5000):
        curves(record(step, evaluated=step % 10 == 0))
    curves.flush()
    for key in ("train_mlm_loss", "eval_mlm_loss", "lr"):
        x = np.asarray(trace_named(curves, key).x)
        assert len(x) <= 100 and x[0] == 0 and (np.diff(x) > 0).all()
        assert x[-1] == (4999 if key != "eval_mlm_loss" else 4990)  # the latest point is always drawn
    # the static fallback too: one polyline per series with at most max_points points
    static = parse_html(curves.static_html())
    assert static.tags.count("polyline") == 7
    assert max(curves.static_html().split('points="')[i].split('"')[0].count(",") for i in range(1, 8)) <= 100
    x, y = downsample(np.arange(10.0), np.arange(10.0) * 2, 4)
    assert len(x) <= 4 and x[0] == 0 and x[-1] == 9 and (y == 2 * x).all()
    x2, y2 = downsample_points([(float(i), 2.0 * i) for i in range(10)], 4)
    assert x2.tolist() == x.tolist() and y2.tolist() == y.tolist()


def test_accepts_metrics_records_and_skips_missing_values():
    curves = LossCurves(min_interval=0)
    curves(MetricsRecord(step=1, train_loss=1.0, train_mlm_loss=None, train_nsp_loss=0.7, train_mlm_accuracy=None,
                         train_nsp_accuracy=0.5, lr=1e-3, grad_norm=1.0, time=0.1))
    curves(MetricsRecord(step=2, train_loss=1.0, train_mlm_loss=0.9, train_nsp_loss=float("nan"),
                         train_mlm_accuracy=0.1, train_nsp_accuracy=0.5, lr=2e-3, grad_norm=1.0, time=0.2,
                         eval_mlm_loss=0.8, eval_nsp_loss=0.6, eval_mlm_accuracy=0.3, eval_nsp_accuracy=0.7))
    assert curves.records == 2 and curves.redraws == 2  # min_interval=0: every record draws
    assert curves.history["train_mlm_loss"] == [(2.0, 0.9)] and curves.history["train_nsp_loss"] == [(1.0, 0.7)]
    assert curves.history["eval_nsp_accuracy"] == [(2.0, 0.7)] and len(curves.history["lr"]) == 2
    assert "eval MLM acc 0.3" in curves.status.value


def test_a_redraw_sends_only_the_downsampled_series_and_status():
    """Training pays one __call__ per step and one redraw per min_interval; a redraw sends at most max_points
    float32 pairs per series (the cost on training throughput is measured in benchmarks/widgets.py)."""
    curves = LossCurves(min_interval=3600, max_points=1000)
    values = record(1, evaluated=True)  # all seven series
    for step in range(20_000):
        values["step"] = step
        curves(values)
    curves.flush()
    assert curves.redraws == 2  # the first record, then this flush
    assert all(990 <= len(curves.drawn(key)[0]) <= 1000 for key in KEYS)
    assert sum(len(data) for data in curves.chart.curves.values()) <= 7 * 1000 * 2 * 4  # float32 (x, y) pairs
    before = dict(curves.chart.curves)
    curves(record(20_000))  # a step without evaluation: only the 3 training series change
    with sent_messages(curves.chart) as sizes:
        curves.flush()
    changed = {key for key in KEYS if curves.chart.curves[key] != before[key]}
    assert changed == {"train_mlm_loss", "train_nsp_loss", "lr"}
    series_bytes = 3 * 1000 * 8
    drawing = len(json.dumps(curves.chart.svg))  # the figure as the message carries it: at most 400 points a series
    assert drawing < 80_000
    assert len(sizes) == 1 and series_bytes * 0.99 + drawing <= sizes[0] <= series_bytes + drawing + 1000


def test_follows_trainer_fit_with_eval_records():
    trainer = tiny_trainer(max_steps=40, eval_interval=10)
    curves = LossCurves(trainer, min_interval=0.2)
    assert trainer.callbacks == [curves]
    LossCurves.attach(curves, trainer)
    assert trainer.callbacks == [curves]  # attaching twice registers once
    started = time.monotonic()
    history = trainer.fit()
    elapsed = time.monotonic() - started
    assert curves.records == len(history) == 40
    assert [step for step, _ in curves.history["train_mlm_loss"]] == [float(r.step) for r in history
                                                                     if r.train_mlm_loss is not None]
    assert [step for step, _ in curves.history["eval_nsp_loss"]] == [10.0, 20.0, 30.0, 40.0]
    assert curves.redraws <= 2 + elapsed / 0.2
    assert wait_until(lambda: last_x(curves, "lr") == 40)
    np.testing.assert_allclose(trace_named(curves, "train_nsp_loss").y, [r.train_nsp_loss for r in history],
                               rtol=1e-6)


def test_follows_a_background_run_and_the_stop_button_ends_it():
    trainer = tiny_trainer(max_steps=100_000)
    curves = LossCurves(trainer, min_interval=0.1)
    assert curves.stop_button.layout.display == "none"  # shown only while a background run goes
    trainer.start()
    try:
        assert wait_until(lambda: curves.records >= 5, timeout=30)
        assert curves.stop_button.layout.display is None
        curves.stop_button.click()
        assert "stopping" in curves.status.value
        assert trainer.join(timeout=30)
    finally:
        trainer.stop(wait=True, timeout=30)
    assert trainer.stop_reason == "stopped" and 5 <= trainer.step < 100_000
    assert curves.records == trainer.step == len(trainer.history)
    assert wait_until(lambda: last_x(curves, "train_nsp_loss") == trainer.step)
    assert curves.stop_button.layout.display == "none"  # the run has ended
    assert curves.status.value.startswith(f"step {trainer.step} of 100000 · stopped · ")
    assert curves.status.value.count("step") == 1


def test_a_foreground_fit_shows_no_stop_button_and_says_it_finished():
    trainer = tiny_trainer(max_steps=3)
    curves = LossCurves(trainer, min_interval=3600)
    trainer.fit()
    assert curves.records == 3 and curves.stop_button.layout.display == "none"
    assert curves.status.value.startswith("step 3 of 3 · finished · ")


def test_to_html_writes_the_figure_on_screen_in_a_theme(tmp_path):
    curves = LossCurves(min_interval=3600, title="my run")
    for step in range(50):
        curves(record(step, evaluated=step % 10 == 0))
    text = curves.to_html(tmp_path / "curves.html", theme="dark").read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 5 and "<script" not in text  # 4 in 1
    assert "http" not in text.replace("http://www.w3.org/2000/svg", "")  # no CDN, nothing fetched
    assert parse_html(text).tags.count("polyline") == 7
    assert curves.to_svg().split(">", 1)[1] in text  # the figure on screen, its stylesheet resolved to dark inside
    assert "<style>" in text and "#111111" in text and "var(" not in text
    assert curves.chart.curves["train_mlm_loss"] and len(curves.drawn("train_mlm_loss")[0]) == 50  # flushed first
    bundle = curves._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_svg_has_titles_axis_titles_legends_and_the_status(tmp_path):
    trainer = tiny_trainer(max_steps=30, eval_interval=10)
    curves = LossCurves(trainer, min_interval=3600, title="tiny <run> & co")
    trainer.fit(12)
    svg = curves.to_svg()
    root = ET.fromstring(svg)
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG_NS}text")]
    assert texts[0] == "tiny <run> & co" and "<run>" not in svg  # escaped in the source, shown as written
    assert texts[1] == curves.status_text() and texts[1].startswith("step 12 of 30 · finished · ")
    for title, y_title in CHARTS:
        assert title in texts and y_title in texts
    assert texts.count("step") >= 4  # every x axis
    for _, _, name, *_ in SERIES:
        assert name in texts  # legends
    classes = [e.get("class") for e in root.iter() if e.get("class")]
    assert classes.count("bvl-axis-title") == 8 and classes.count("bvl-series") == 7
    png = curves.save(tmp_path / "curves.png", scale=1.5)
    width, height = (float(v) for v in (root.get("width"), root.get("height")))
    assert struct.unpack(">II", png.read_bytes()[16:24]) == (round(width * 1.5), round(height * 1.5))
    # the browser view shows this very drawing, and holds the series its hover reads
    assert curves.chart.svg == svg
    assert curves.chart.names == {key: name for _, key, name, *_ in SERIES}
    x, y = curves.drawn("train_nsp_loss")
    assert x.tolist() == list(range(1, 13))
    np.testing.assert_allclose(y, [r.train_nsp_loss for r in trainer.history], rtol=1e-6)
    code = esm("loss_curves.js")
    assert 'showFigure(root, model.get("svg"))' in code and "innerHTML" not in code and "cssText" not in code


def plot_frames(svg: str) -> list[ET.Element]:
    return [e for e in ET.fromstring(svg).iter(f"{SVG_NS}rect") if "bvl-plot" in (e.get("class") or "").split()]


def test_each_plot_frame_tells_the_view_its_ranges_box_and_series():
    trainer = tiny_trainer(max_steps=30, eval_interval=10)
    curves = LossCurves(trainer, min_interval=3600)
    trainer.fit(20)
    frames = plot_frames(curves.to_svg())
    assert len(frames) == len(CHARTS)
    for index, frame in enumerate(frames):
        assert frame.get("data-keys").split() == [key for chart, key, *_ in SERIES if chart == index]
        assert (float(frame.get("data-x0")), float(frame.get("data-x1"))) == (0.0, 30.0)  # the run's length
        values = np.concatenate([curves.drawn(key)[1] for key in frame.get("data-keys").split()])
        y0, y1 = float(frame.get("data-y0")), float(frame.get("data-y1"))
        slack = 1e-6 * np.abs(values).max()  # the view holds float32
        assert y0 <= values.min() + slack and y1 >= values.max() - slack  # no value beyond the outermost ticks
        assert y1 - y0 <= 2.5 * (values.max() - values.min()) or values.max() == values.min()
        assert float(frame.get("width")) > 300 and float(frame.get("height")) > 150
    # each line's last point sits where the frame's ranges put it: the view's hover maps pixels the same way
    root = ET.fromstring(curves.to_svg())
    for chart in root.findall(f"{SVG_NS}svg"):  # the four charts, each with its own frame
        frame = next((e for e in chart.iter(f"{SVG_NS}rect") if "bvl-plot" in (e.get("class") or "")), None)
        for line in chart.iter(f"{SVG_NS}polyline"):
            x, y = curves.drawn(line.get("data-key"))
            x0, x1, y0, y1 = (float(frame.get(f"data-{n}")) for n in ("x0", "x1", "y0", "y1"))
            px, py = (float(v) for v in line.get("points").split()[-1].split(","))
            assert px == pytest.approx(float(frame.get("x")) + (x[-1] - x0) / (x1 - x0) * float(frame.get("width")),
                                       abs=0.06)
            top, height = float(frame.get("y")), float(frame.get("height"))
            assert py == pytest.approx(top + height - (y[-1] - y0) / (y1 - y0) * height, abs=0.06)
            assert int(line.get("data-n")) == len(x)
        grid = sorted(float(line.get("y1")) for line in chart.iter(f"{SVG_NS}line") if line.get("class") == "bvl-grid")
        top, bottom = float(frame.get("y")), float(frame.get("y")) + float(frame.get("height"))
        assert grid[0] == pytest.approx(top, abs=0.06) and grid[-1] == pytest.approx(bottom, abs=0.06)  # ends on ticks


def test_the_figure_follows_the_theme_and_reads_without_colour():
    curves = LossCurves(min_interval=0)
    for step in range(40):
        curves(record(step, evaluated=step % 10 == 9))
    svg = curves.to_svg()
    root = ET.fromstring(svg)
    assert root.get("class").split() == ["bvl-fig", "bvl-chart-grid"]
    assert root[0].tag == f"{SVG_NS}rect" and root[0].get("class") == "bvl-ground"
    for element in root.iter():
        assert element.get("font-family") is None  # the sans font comes from .bvl-fig
        if element.tag == f"{SVG_NS}text":
            assert element.get("fill") is None  # text takes the theme's ink
        assert element.get("fill") in (None, "none") or element.tag == f"{SVG_NS}path"  # only markers are filled
    assert 'fill="white"' not in svg and "#fff" not in svg.lower()
    # series sharing a chart differ by dashes or marker, not only by colour; every colour reads on both grounds
    for index in range(len(CHARTS)):
        looks = [(dash, marker) for chart, _, _, _, dash, marker in SERIES if chart == index]
        assert len(set(looks)) == len(looks)
    accuracy = {key: (dash, marker) for _, key, _, _, dash, marker in SERIES if "accuracy" in key}
    assert len(set(accuracy.values())) == 2 and all(dash and marker for dash, marker in accuracy.values())
    assert all(reads_on_both_grounds(color) for _, _, _, color, *_ in SERIES)
    assert contrast_ratio(SERIES[0][3], "#111111") >= 3
    markers = [e for e in root.iter(f"{SVG_NS}path") if e.get("class") == "bvl-markers"]
    assert {m.get("data-key") for m in markers} == {key for _, key, *_, marker in SERIES if marker}


def test_status_line_before_during_and_after_a_run():
    curves = LossCurves(min_interval=0)
    assert curves.status.value == "waiting for the first step"
    curves(record(5))
    assert curves.status.value.startswith("step 5 · training · train MLM ")  # no trainer: no total known
    trainer = tiny_trainer(max_steps=2)
    curves.attach(trainer)
    trainer.fit()
    assert curves.status.value.startswith("step 2 of 2 · finished · ")


def test_static_html_escapes_the_title():
    curves = LossCurves(title="<img src=x onerror=alert(1)>")
    curves(record(1))
    assert_safe_html(curves.static_html(), must_show=None)


# TrainingPanel ------------------------------------------------------------------------------------------
RUN = {"data": {"corpus": "synthetic", "vocab_size": 100, "sequence_length": 16, "batch_size": 8,
                "num_train_batches": 4, "num_test_batches": 1},
       "model": {"preset": "tiny", "dim_model": 32, "num_heads": 2, "dim_ff": 64, "num_layers": 1},
       "training": {"steps": 6, "eval_interval": 3, "device": "cpu"},
       "logging": {"progress": False, "log_interval": 0}}


def test_training_panel_start_trains_in_the_background_and_stops_at_the_last_step():
    panel = TrainingPanel(run_config=RUN, steps=4)
    assert panel.trainer is None  # nothing is built before Start
    panel.start_button.click()
    assert panel.trainer is not None and panel.curves.trainer is panel.trainer
    assert panel.trainer.join(timeout=60)
    assert panel.trainer.step == 4 and panel.curves.records == 4
    assert len(panel.curves.history["eval_nsp_loss"]) == 1
    assert panel.message.value == "" and panel.curves.status.value.startswith("step 4 of 6 · finished · ")
    panel.resume_button.click()  # the remaining 2 steps
    assert panel.trainer.join(timeout=60) and panel.trainer.step == 6 and panel.curves.records == 6
    assert panel.resume_button.disabled and "last step" in panel.resume_button.tooltip
    assert wait_until(lambda: last_x(panel.curves, "lr") == 6)
    assert panel.static_html() == panel.curves.static_html()


def test_training_panel_reports_a_bad_run_config():
    panel = TrainingPanel(run_config={"training": {"steps": -1}})
    panel.start()
    assert "training.steps" in panel.message.value and panel.trainer is None


def test_training_panel_around_an_existing_trainer():
    trainer = tiny_trainer(max_steps=3)
    panel = TrainingPanel(trainer)
    assert panel.curves in trainer.callbacks
    trainer.fit()
    assert panel.curves.records == 3


def test_values_at_the_float_limit_draw_without_an_error_or_a_non_finite_coordinate():
    """A diverged run's ±1e308 (and an infinity) are drawn at their chart's edge: the static figure, its numbers and
    the live view's float32 data hold no NaN or infinity, and nothing warns."""
    import re
    import warnings

    from bertviz_lab.widgets.panels.loss_curves import FLOAT32_MAX, pack, unpack

    curves = LossCurves(min_interval=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for step, value in enumerate([1e308, -1e308, 5.0, float("inf")], start=1):
            curves({"step": step, "train_mlm_loss": value, "train_nsp_loss": -1.7e308, "lr": 1e-4})
        curves.flush()
        svg = curves.to_svg()
        x, y = unpack(pack(np.array([1.0, 2.0, 3.0]), np.array([1e308, -np.inf, np.nan])))
    ET.fromstring(svg)
    assert not re.findall(r'="[^"]*(?i:nan|inf)', svg)  # no coordinate or data attribute; the status names "inf"
    assert "train MLM inf" in svg
    assert "1e+308" in svg and "-1.7e+308" in svg  # the ticks name the real values
    assert list(y[:2]) == [FLOAT32_MAX, -FLOAT32_MAX] and np.isnan(y[2])
