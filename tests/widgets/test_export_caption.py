"""Paper-ready exports: save(path, scale=, caption=) and the toolbar's scale and caption choices. The scale sets the
PNG's pixel size; the caption is one escaped SVG text line under the figure (the model's name and the shortened
text), the same in SVG and PNG."""

from __future__ import annotations

import io
import struct
import xml.etree.ElementTree as ET

import ipywidgets as widgets
import numpy as np
import pytest
import torch

from bertviz_lab.widgets.figures.caption import CAPTION_HEIGHT, caption_line, shortened, with_caption
from bertviz_lab.widgets.figures.charts import svg_open
from bertviz_lab.widgets.panels import model_label
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.model_label import count_text, model_name, model_summary, remember_name
from bertviz_lab.widgets.panels.panel import Panel

SVG_NS = "{http://www.w3.org/2000/svg}"
WIDTH, HEIGHT = 640, 80
HOSTILE = 'The <b>cat</b> & "dog" sat on the mat because it was warm and the sun shone on it all afternoon long.'


class Figure(Panel):
    """A panel showing one rectangle, with a model and a text as the real panels have them."""

    def __init__(self, model: torch.nn.Module | None = None, text: str | None = None) -> None:
        self.model, self.text, self.text_b = model, text, None
        super().__init__([widgets.HTML("live")])

    def to_svg(self) -> str:
        return (svg_open(WIDTH, HEIGHT, "test") + '<rect x="10" y="10" width="100" height="40" fill="#d62728"/>'
                "</svg>")


@pytest.fixture
def named_model(pretraining_model):
    """The session's tiny model under a hostile name, for this test only."""
    yield remember_name(pretraining_model, "tiny <bert> & co")
    model_label._names.pop(pretraining_model, None)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def png_pixels(data: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def caption_texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [node.text or "" for node in root.iter(f"{SVG_NS}text") if "bvl-caption" in node.get("class", "")]


@pytest.mark.parametrize("scale", [1, 2, 4])
def test_a_png_is_scale_times_the_figure(tmp_path, scale):
    path = Figure().save(tmp_path / f"figure-{scale}.png", scale=scale)
    assert png_size(path.read_bytes()) == (WIDTH * scale, HEIGHT * scale)


def test_the_toolbar_exports_at_the_chosen_scale_with_the_chosen_caption(tmp_path, monkeypatch, named_model):
    monkeypatch.chdir(tmp_path)
    bar = ExportBar(Figure(named_model, HOSTILE), "figure")
    assert [value for _, value in bar.scale.options] == [1, 2, 4] and bar.caption.value is False
    bar.format.value, bar.scale.value = "png", 4
    plain = bar.export()
    assert png_size(plain.read_bytes()) == (WIDTH * 4, HEIGHT * 4)
    bar.caption.value = True
    captioned = bar.export()
    assert png_size(captioned.read_bytes()) == (WIDTH * 4, (HEIGHT + CAPTION_HEIGHT) * 4)
    bar.format.value = "svg"
    assert caption_texts(bar.export().read_text(encoding="utf-8"))[0].startswith("tiny <bert> & co · “The <b>cat")


def test_caption_true_names_the_model_and_the_shortened_text_escaped(tmp_path, named_model):
    svg = Figure(named_model, HOSTILE).save(tmp_path / "figure.svg", caption=True).read_text(encoding="utf-8")
    assert "tiny &lt;bert&gt; &amp; co" in svg and "&lt;b&gt;cat&lt;/b&gt; &amp; &quot;dog&quot;" in svg
    assert "<b>" not in svg
    (line,) = caption_texts(svg)  # the parser unescapes: the text as the reader sees it
    assert line == f"tiny <bert> & co · “{shortened(HOSTILE)}”"
    assert shortened(HOSTILE).endswith("…") and len(shortened(HOSTILE)) <= 60
    assert HOSTILE.startswith(shortened(HOSTILE)[:-1])
    root = ET.fromstring(svg)
    assert float(root.get("height")) == HEIGHT + CAPTION_HEIGHT
    assert root.get("viewBox").split()[-1] == str(HEIGHT + CAPTION_HEIGHT)


def test_a_caption_string_is_used_verbatim_and_escaped(tmp_path):
    svg = Figure().save(tmp_path / "figure.svg", caption="Figure 3: <script>alert(1)</script>").read_text("utf-8")
    assert caption_texts(svg) == ["Figure 3: <script>alert(1)</script>"] and "<script>" not in svg


def test_no_caption_leaves_the_figure_as_it_is(tmp_path, named_model):
    panel = Figure(named_model, HOSTILE)
    svg = panel.save(tmp_path / "figure.svg").read_text(encoding="utf-8")
    assert caption_texts(svg) == [] and float(ET.fromstring(svg).get("height")) == HEIGHT
    assert caption_texts(panel.save(tmp_path / "empty.svg", caption="").read_text("utf-8")) == []


def test_the_png_carries_the_caption_the_svg_has(tmp_path, named_model):
    panel = Figure(named_model, HOSTILE)
    plain = png_pixels(panel.save(tmp_path / "plain.png", scale=2).read_bytes())
    captioned = png_pixels(panel.save(tmp_path / "captioned.png", scale=2, caption=True).read_bytes())
    assert captioned.shape == (2 * (HEIGHT + CAPTION_HEIGHT), 2 * WIDTH, 3)
    assert np.array_equal(captioned[: 2 * HEIGHT], plain)  # the figure itself is unchanged
    strip = captioned[2 * HEIGHT:]
    ink = (strip.astype(int).sum(axis=2) < 400).sum()  # dark text on the light ground
    assert ink > 200, "the caption strip holds no text"
    dark = png_pixels(panel.save(tmp_path / "dark.png", theme="dark", caption=True).read_bytes())
    assert (dark[HEIGHT:].astype(int).sum(axis=2) > 400).sum() > 50  # light text on the dark ground


def test_caption_errors_are_one_line(tmp_path):
    with pytest.raises(TypeError, match="caption must be True, False or a string, got int"):
        Figure().save(tmp_path / "figure.svg", caption=3)


def test_a_caption_on_a_figure_with_its_own_view_box_scales_with_it():
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" viewBox="0 0 400 200"><g/></svg>'
    root = ET.fromstring(with_caption(svg, "model · “text”"))
    assert root.get("height") == str(100 + CAPTION_HEIGHT)
    assert root.get("viewBox") == f"0 0 400 {200 + 2 * CAPTION_HEIGHT}"
    (text,) = root.iter(f"{SVG_NS}text")
    assert float(text.get("font-size")) == 24 and 200 < float(text.get("y")) < 200 + 2 * CAPTION_HEIGHT


def test_a_long_caption_is_cut_to_the_figure_width():
    line = with_caption(svg_open(120, 40, "test") + "</svg>", "word " * 100)
    (text,) = caption_texts(line)
    assert text.endswith("…") and len(text) < 40


def test_caption_line_and_model_labels(named_model, backbone):
    assert caption_line("m", "a b", "c") == "m · “a b” / “c”" and caption_line("", None) == ""
    assert model_name(named_model) == "tiny <bert> & co" and model_name(backbone) == "BERT"
    count = sum(p.numel() for p in backbone.parameters())
    assert model_summary(backbone) == f"BERT · {count_text(count)} · 3 layers × 4 heads"
    assert count_text(22_713_216) == "22.7 M parameters" and count_text(999) == "999 parameters"
