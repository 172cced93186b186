"""to_plotly(): the heatmap, the loss curves and the saliency view as plotly figures whose data are the values the
drawing shows (the whole matrix, every point, every token), with its colour scale, titles and hover; the views with
no plotly counterpart yet, and a missing plotly, are one line."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from bertviz_lab import views
from bertviz_lab.widgets import AttentionPanel, LossCurves, SaliencyPanel
from bertviz_lab.widgets.figures.attention_data import _BLUES, _RDBU
from bertviz_lab.widgets.panels.loss_curves import SERIES

go = pytest.importorskip("plotly.graph_objects")

TEXT = "The cat sat on the mat because the mat was warm."  # "the" and "mat" twice: positions keep every row


def test_the_heatmap_as_plotly_holds_the_whole_map_with_its_tokens_and_scale(pretraining_model, minilm_tokenizer):
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT, layer=1, head=2,
                           view="heatmap")
    figure = panel.to_plotly()
    assert isinstance(figure, go.Figure)
    (trace,) = figure.data
    expected = panel.trace.attention(1)[0, 2].numpy()
    np.testing.assert_allclose(np.asarray(trace.z), expected, rtol=0, atol=1e-7)  # the float32 weights, not codes
    tokens = panel.trace.tokens[0]
    assert list(figure.layout.yaxis.ticktext) == tokens and list(figure.layout.xaxis.ticktext) == tokens
    assert list(trace.y) == list(range(len(tokens))) and figure.layout.yaxis.autorange == "reversed"
    assert [stop[1] for stop in trace.colorscale] == list(_BLUES) and trace.zmin == 0
    assert "[CLS]/[SEP] clipped" in panel.heatmap.title  # the default: they do not set the top of the scale
    assert trace.zmax == pytest.approx(expected[1:-1, 1:-1].max(), rel=1e-6)  # as the drawing's scale
    assert figure.layout.title.text.startswith(panel.heatmap.title.split(" · queries")[0])
    assert "weight %{z:.4f}" in trace.hovertemplate and tuple(trace.customdata[1][3]) == (tokens[1], tokens[3])
    panel.view.value = "neuron view"
    with pytest.raises(ValueError, match="to_plotly\\(\\) gives the heatmap, the head view, the model view or the "
                                         "saliency view; this panel shows the neuron view"):
        panel.to_plotly()
    panel.close()


def test_the_head_view_as_plotly_holds_every_drawn_line_with_its_weight_and_opacity(pretraining_model,
                                                                                    minilm_tokenizer):
    from bertviz_lab.widgets.figures.head_view import MIN_OPACITY, head_color
    from bertviz_lab.widgets.figures.plotly_figures import OPACITY_LEVELS

    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT, layer=1, view="head view")
    figure = panel.to_plotly()
    indices, weights = panel.head_view.lines()
    heads = panel.head_view.heads
    top = max(float(weights[h].max()) for h in heads)
    markers = [t for t in figure.data if t.mode == "markers" and t.name]
    assert [t.name for t in markers] == [f"head {h}" for h in heads]
    for head, trace in zip(heads, markers):
        q, slot = np.nonzero(weights[head] / top >= MIN_OPACITY)
        expected = sorted(zip(q.tolist(), indices[head][q, slot].tolist(), weights[head][q, slot].tolist()))
        got = sorted((int(a), int(b), float(c)) for a, b, c in np.asarray(trace.customdata))
        assert [(a, b) for a, b, _ in got] == [(a, b) for a, b, _ in expected]
        np.testing.assert_allclose([c for *_, c in got], [c for *_, c in expected], rtol=1e-6)
        lines = [t for t in figure.data if t.mode == "lines" and t.legendgroup == f"head {head}"]
        assert all(t.line.color == head_color(head) for t in lines)
        assert sum(len(t.x) // 3 for t in lines) == len(got)  # one segment a line, each with its opacity level
        assert {round(t.opacity * OPACITY_LEVELS) for t in lines} <= set(range(1, OPACITY_LEVELS + 1))
    assert list(figure.layout.yaxis.ticktext) == panel.head_view.query_tokens
    assert figure.layout.title.text.startswith(panel.head_view.full_title())
    panel.close()


def test_the_model_view_as_plotly_holds_each_thumbnail_under_one_scale(pretraining_model, minilm_tokenizer):
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT, view="model view")
    figure = panel.to_plotly()
    drawn = panel.model_view.decoded()  # the thumbnails' values: what the drawing shows
    L, H = drawn.shape[:2]
    assert len(figure.data) == L * H
    for index, trace in enumerate(figure.data):
        np.testing.assert_array_equal(np.asarray(trace.z), drawn[index // H, index % H])
        assert trace.coloraxis == "coloraxis" and f"layer {index // H} · head {index % H}" in trace.hovertemplate
    axis = figure.layout.coloraxis
    assert [stop[1] for stop in axis.colorscale] == list(_BLUES) and axis.cmin == 0
    assert axis.cmax == pytest.approx(drawn.max(), rel=1e-6) and axis.colorbar.title.text == panel.model_view.bar_title
    panel.close()


def test_bertvizs_heatmap_call_gives_the_same_figure_data():
    torch.manual_seed(0)
    layers = tuple(torch.softmax(torch.randn(1, 2, 5, 5), -1) for _ in range(2))
    panel = views.heatmap(layers, ["a", "b", "a", "c", "d"], layer=1, heads=[1])
    np.testing.assert_allclose(np.asarray(panel.to_plotly().data[0].z), layers[1][0, 1].numpy(), atol=1e-7)
    panel.view.value = "model view"
    codes = panel.model_view.decoded()
    np.testing.assert_array_equal(np.asarray(panel.to_plotly().data[3].z), codes[1, 1])
    panel.view.value = "head view"
    assert [t.name for t in panel.to_plotly().data if t.name] == ["head 1"]  # the head asked for
    panel.close()


def test_the_loss_curves_as_plotly_hold_every_point_of_every_series():
    curves = LossCurves(min_interval=3600, title="a run")
    for step in range(1, 31):
        curves({"step": step, "train_mlm_loss": 8 / step ** 0.5, "train_nsp_loss": 0.7 / step ** 0.2,
                "eval_mlm_loss": 7 / step ** 0.5 if step % 10 == 0 else None, "eval_nsp_loss": None,
                "eval_mlm_accuracy": step / 40 if step % 10 == 0 else None, "eval_nsp_accuracy": None,
                "lr": 1e-3 * min(step / 5, 1)})
    figure = curves.to_plotly()
    traces = {trace.name: trace for trace in figure.data}
    assert list(traces) == [name for _, _, name, *_ in SERIES]
    for _, key, name, color, dash, marker in SERIES:
        x, y = (np.array([p[i] for p in curves.history[key]]) for i in (0, 1))
        np.testing.assert_array_equal(np.asarray(traces[name].x), x)
        np.testing.assert_array_equal(np.asarray(traces[name].y), y)  # float64: the values received
        assert traces[name].line.color == color and (traces[name].line.dash == "solid") == (dash == "")
    assert [a.text for a in figure.layout.annotations] == ["MLM loss", "NSP loss", "accuracy", "learning rate"]
    assert figure.layout.title.text.startswith("a run<br><sup>step 30")


def test_the_saliency_view_as_plotly_holds_each_tokens_score(pretraining_model, minilm_tokenizer):
    panel = SaliencyPanel(pretraining_model, minilm_tokenizer, "The cat sat on the [MASK].",
                          method="gradient_x_input")
    panel.wait()
    figure = panel.to_plotly()
    (trace,) = figure.data
    np.testing.assert_array_equal(np.asarray(trace.y), panel.scores.astype(np.float64))
    assert list(figure.layout.xaxis.ticktext) == panel.tokens
    assert [stop[1] for stop in trace.marker.colorscale] == list(_RDBU)
    assert trace.marker.cmin == -trace.marker.cmax == pytest.approx(-np.abs(panel.scores).max())
    title, subtitle, _ = panel._header()
    assert figure.layout.title.text.startswith(f"{title}<br><sup>{subtitle}")


def test_without_plotly_it_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    with pytest.raises(ImportError, match=r"to_plotly\(\) needs plotly: pip install 'bertviz_lab\[plotly\]'"):
        LossCurves().to_plotly()
