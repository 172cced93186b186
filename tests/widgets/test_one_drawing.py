"""One drawing per figure, for every view in a few states: what the live view shows (its synced `svg`), the static
copy saved in the notebook and `save("x.svg")` are the same SVG document (the export adds only its theme's
stylesheet), and an export names no font the package does not ship."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

import pytest
from test_export_themes import GENERIC, font_families, shipped_families

from bertviz_lab.widgets import ArchitecturePanel, AttentionPanel, DevicePicker, LossCurves, MaskingPreview
from bertviz_lab.widgets.figures.export import themed
from bertviz_lab.widgets.panels.logit_lens import LogitLensPanel
from bertviz_lab.widgets.panels.panel import Panel
from bertviz_lab.widgets.panels.patching import PatchingPanel
from bertviz_lab.widgets.views.front_end import all_css

TEXT = "The cat sat on the <b>mat</b> & it was warm."
PAIR = "It stayed there all day."


def live_drawings(panel: Panel) -> list[str]:
    """The `svg` of every anywidget view of the panel that is on screen now (what the browser shows)."""
    found, todo = [], [panel]
    while todo:
        widget = todo.pop()
        if hasattr(widget, "svg") and isinstance(getattr(widget, "svg"), str) and widget.svg:
            found.append(widget.svg)
        todo += list(getattr(widget, "children", ()))
    return found


def attention(view: str, **state) -> Callable:
    def make(model, tokenizer) -> Panel:
        panel = AttentionPanel(model=model, tokenizer=tokenizer, text=TEXT, text_b=PAIR, view=view)
        for name, value in state.items():
            getattr(panel, name).value = value
        if view == "saliency":
            panel.saliency.background = False
            panel.saliency.rerun()
        return panel
    return make


def curves(model, tokenizer) -> Panel:
    panel = LossCurves(min_interval=0)
    for step in range(1, 30):
        panel({"step": step, "train_mlm_loss": 9 / step, "train_nsp_loss": 0.7, "lr": 1e-4,
               "eval_mlm_accuracy": step / 40 if step % 7 == 0 else None})
    panel.flush()
    return panel


PANELS = {
    "heatmap": attention("heatmap"),
    "heatmap, log scale, layer 2": attention("heatmap", scale="log", layer=2),
    "heatmap, mean of heads": attention("heatmap", aggregation="mean"),
    "head view": attention("head view", layer=1),
    "model view": attention("model view"),
    "neuron view": attention("neuron view", head=1),
    "saliency": attention("saliency"),
    "masking": lambda model, tokenizer: MaskingPreview(tokenizer, TEXT, model=model),
    "loss curves": curves,
    "architecture": lambda model, tokenizer: ArchitecturePanel(model),
    "logit lens": lambda model, tokenizer: LogitLensPanel(model, tokenizer, TEXT, track="cat"),
    "activation patching": lambda model, tokenizer: PatchingPanel(model, tokenizer),
    "activation patching, heads": lambda model, tokenizer: PatchingPanel(model, tokenizer, point="head_out"),
}
NEEDS = {"architecture": pytest.mark.needs_program("dot")}


@pytest.mark.parametrize("name", [pytest.param(name, marks=NEEDS.get(name, ())) for name in PANELS])
def test_live_view_static_copy_and_export_are_one_drawing(name, pretraining_model, minilm_tokenizer, tmp_path):
    panel = PANELS[name](pretraining_model, minilm_tokenizer)
    drawing = panel.to_svg()
    ET.fromstring(drawing)  # one well-formed document
    assert 'class="bvl-fig' in drawing[:drawing.index(">")], "the root is a themed figure"
    assert drawing in live_drawings(panel), "the live view shows another drawing than to_svg()"
    assert drawing in panel.static_copy.html(), "the static copy holds another drawing"
    saved = Path(panel.save(tmp_path / "x.svg")).read_text(encoding="utf-8")
    assert saved == themed(drawing, all_css(), "light")
    dark = Path(panel.save(tmp_path / "dark.svg", theme="dark")).read_text(encoding="utf-8")
    assert re.sub(r"<style>.*?</style>", "", dark, flags=re.S) == drawing  # only the theme differs
    assert font_families(saved) <= shipped_families() | GENERIC, font_families(saved) - shipped_families()
    assert "<b>mat</b>" not in saved and "<script" not in saved


def test_a_change_made_after_display_reaches_all_three(pretraining_model, minilm_tokenizer, tmp_path):
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT, view="heatmap")
    before = panel.to_svg()
    panel.layer.value, panel.head.value = 2, 3  # as a dropdown in any front end sets them
    after = panel.to_svg()
    assert after != before and "layer 2 · head 3" in after
    assert after in live_drawings(panel) and after in panel.static_copy.html()
    assert Path(panel.save(tmp_path / "x.svg")).read_text(encoding="utf-8") == themed(after, all_css(), "light")


def test_the_device_table_exports_themed_in_the_shipped_fonts(pretraining_model, tmp_path):
    """The device picker shows an HTML table (buttons to move the model); its export is that table drawn as SVG."""
    picker = DevicePicker(pretraining_model)
    saved = Path(picker.save(tmp_path / "x.svg", theme="dark")).read_text(encoding="utf-8")
    assert saved == themed(picker.to_svg(), all_css(), "dark") and "#111111" in saved
    assert font_families(saved) <= shipped_families() | GENERIC
