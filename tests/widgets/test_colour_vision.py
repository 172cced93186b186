"""Colour vision: the colours that tell series apart stay apart for readers with red-green colour blindness.

Deuteranopia and protanopia are simulated with Machado et al. (2009)'s severity 1.0 matrices (figures/contrast.py),
and two colours count as distinguishable when their CIE76 distance ΔE*ab is at least MIN_DELTA_E as such a reader sees
them. Series that share a chart also differ by dash pattern or marker, so none is told apart by colour alone.
"""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET

import pytest

from bertviz_lab.widgets.figures import neuron
from bertviz_lab.widgets.figures.contrast import COLOUR_BLINDNESS, as_seen_with, cielab, delta_e
from bertviz_lab.widgets.figures.palette import CURVE_COLORS, reads_on_both_grounds
from bertviz_lab.widgets.panels.loss_curves import SERIES, LossCurves

MIN_DELTA_E = 20.0  # CIE76: about 2.3 is just noticeable; 20 tells two thin lines apart at a glance
DEFICIENCIES = tuple(COLOUR_BLINDNESS)
SVG = "{http://www.w3.org/2000/svg}"


def test_cielab_matches_the_published_values_of_the_srgb_primaries():
    # CIE L*a*b* (D65) of sRGB red, green and blue, as colour-science tables give them
    for color, expected in (("#ff0000", (53.24, 80.09, 67.20)), ("#00ff00", (87.73, -86.18, 83.18)),
                            ("#0000ff", (32.30, 79.19, -107.86)), ("#ffffff", (100.0, 0.0, 0.0))):
        assert cielab(color) == pytest.approx(expected, abs=0.02), color
    assert delta_e("#000000", "#ffffff") == pytest.approx(100.0, abs=0.01)


def hue(color: str) -> float:
    """The CIELAB hue angle of a colour, in degrees."""
    _, a, b = cielab(color)
    return math.degrees(math.atan2(b, a)) % 360


@pytest.mark.parametrize("deficiency", DEFICIENCIES)
def test_the_simulation_keeps_greys_and_turns_red_and_green_into_one_hue(deficiency):
    for grey in ("#000000", "#808080", "#ffffff"):
        assert as_seen_with(grey, deficiency) == grey  # each matrix row sums to 1: neutral colours do not move
    red, green = "#d62728", "#2ca02c"  # the pair red-green colour-blind readers confuse
    assert abs(hue(red) - hue(green)) > 60 and delta_e(red, green) > 100
    seen_red, seen_green = as_seen_with(red, deficiency), as_seen_with(green, deficiency)
    assert abs(hue(seen_red) - hue(seen_green)) < 3  # both a yellowish olive; a protanope sees the red darker
    if deficiency == "deuteranopia":
        assert delta_e(seen_red, seen_green) < 12
    blue, orange = "#1f77b4", "#d95f02"  # a pair they keep apart
    assert delta_e(as_seen_with(blue, deficiency), as_seen_with(orange, deficiency)) > 90


def test_an_unknown_deficiency_or_colour_is_one_clear_error():
    with pytest.raises(ValueError, match="deficiency must be one of .*'tritanopia'"):
        as_seen_with("#1f77b4", "tritanopia")
    with pytest.raises(ValueError, match="colour must be written #rrggbb, got 'red'"):
        as_seen_with("red")


def _charts() -> dict[int, list[tuple]]:
    charts: dict[int, list[tuple]] = {}
    for chart, key, name, color, dash, marker in SERIES:
        charts.setdefault(chart, []).append((key, color, dash, marker))
    return charts


@pytest.mark.parametrize("deficiency", [None, *DEFICIENCIES])
def test_loss_curves_sharing_a_chart_differ_in_colour_for_every_reader_or_share_one(deficiency):
    for chart, series in _charts().items():
        for (key_a, color_a, *_), (key_b, color_b, *_) in itertools.combinations(series, 2):
            if color_a == color_b:  # the same task's train and eval curves: one colour, told apart by dashes
                continue
            seen = (color_a, color_b) if deficiency is None else (as_seen_with(color_a, deficiency),
                                                                     as_seen_with(color_b, deficiency))
            assert delta_e(*seen) >= MIN_DELTA_E, (chart, key_a, key_b, deficiency, seen)


def test_loss_curves_sharing_a_chart_differ_without_colour_and_the_accuracies_by_dash_and_marker():
    for chart, series in _charts().items():
        looks = [(dash, marker) for _, _, dash, marker in series]
        assert len(set(looks)) == len(looks), (chart, looks)
    (_, _, dash_a, marker_a), (_, _, dash_b, marker_b) = _charts()[2]  # the accuracy chart
    assert dash_a and dash_b and dash_a != dash_b and marker_a and marker_b and marker_a != marker_b
    assert all(reads_on_both_grounds(color) for color in CURVE_COLORS.values())


def test_the_drawn_accuracy_curves_differ_by_dash_marker_and_colour_as_a_deuteranope_sees_them():
    curves = LossCurves(min_interval=0)
    for step in range(1, 31):
        curves({"step": step, "train_mlm_loss": 5 / step, "train_nsp_loss": 0.7,
                "eval_mlm_accuracy": step / 40 if step % 5 == 0 else None,
                "eval_nsp_accuracy": step / 50 if step % 5 == 0 else None})
    curves.flush()
    root = ET.fromstring(curves.to_svg())
    accuracy = next(chart for chart in root.iter(f"{SVG}svg") if chart.get("data-chart") == "2")
    lines = {line.get("data-key"): line for line in accuracy.iter(f"{SVG}polyline")}
    markers = {path.get("data-key"): path for path in accuracy.iter(f"{SVG}path")
               if path.get("class") == "bvl-markers"}
    keys = ("eval_mlm_accuracy", "eval_nsp_accuracy")
    assert set(lines) == set(keys) and set(markers) == set(keys), (lines, markers)
    dashes = {lines[key].get("stroke-dasharray") for key in keys}
    assert len(dashes) == 2 and None not in dashes
    # a circle marker is drawn with arcs, a square with straight sides only: the shapes differ, not only the fill
    shapes = {key: "arc" if re.search(r"a[\d.]+,[\d.]+ 0 1,0", markers[key].get("d")) else "sides" for key in keys}
    assert sorted(shapes.values()) == ["arc", "sides"], shapes
    colors = [lines[key].get("stroke") for key in keys]
    assert delta_e(*(as_seen_with(color) for color in colors)) >= MIN_DELTA_E, colors
    curves.close()


@pytest.mark.parametrize("deficiency", DEFICIENCIES)
def test_neuron_view_score_bars_above_and_below_zero_stay_apart(deficiency):
    # the bars also differ by side (right of the centre line: above zero), so colour is a second cue here
    seen = as_seen_with(neuron.POSITIVE, deficiency), as_seen_with(neuron.NEGATIVE, deficiency)
    assert delta_e(*seen) >= MIN_DELTA_E, seen
