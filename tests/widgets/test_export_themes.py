"""Exports in an explicit theme with the shipped fonts: the stylesheet's theme variables resolved to light or dark
colours inside the file, the PNG drawn on that theme's ground, and no font named that the package does not ship."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bertviz_lab.widgets.figures import export, theme
from bertviz_lab.widgets.figures.charts import line_chart
from bertviz_lab.widgets.views.front_end import all_css, css

GENERIC = {"sans-serif", "monospace"}  # mapped to the shipped files by svg_to_png


def font_families(document: str) -> set[str]:
    """Every family a document names: font-family attributes and CSS declarations, generic ones included."""
    found = set()
    for value in re.findall(r'font-family(?:="|\s*:\s*)([^";}>]+)', document):
        found |= {name.strip().strip("'\"") for name in value.split(",") if name.strip()}
    return found


def shipped_families() -> set[str]:
    """The family names inside the shipped font files (their 'name' table, read by PIL)."""
    from PIL import ImageFont

    return {ImageFont.truetype(path, 12).getname()[0] for path in export.font_files()}


def test_the_package_ships_the_fonts_and_their_licence():
    assert shipped_families() == {export.SANS, export.MONO}
    assert len(export.font_files()) == 3  # regular, bold, monospace
    assert "bitstream-vera" in (export.FONTS / "LICENSE.txt").read_text()


@pytest.mark.parametrize("name", ["light", "dark"])
def test_every_theme_variable_the_stylesheets_use_has_a_value(name):
    sheet = all_css()
    assert "var(" in sheet and css("figure") in sheet and css("heatmap") in sheet
    resolved = re.sub(r"/\*.*?\*/", "", theme.resolve(sheet, name), flags=re.S)
    assert "var(" not in resolved
    used = set(re.findall(r"var\(\s*(--[\w-]+)", sheet))
    assert used <= set(theme.THEMES[name]), sorted(used - set(theme.THEMES[name]))


def test_resolve_keeps_fallbacks_and_refuses_what_it_cannot_resolve():
    assert theme.resolve("a { fill: var(--unknown-x, #123456); }", "dark") == "a { fill: #123456; }"
    assert theme.resolve("a { fill: var(--jp-ui-font-color1, #000); }", "dark") == "a { fill: #e6e6e6; }"
    with pytest.raises(ValueError, match="--unknown-y"):
        theme.resolve("a { fill: var(--unknown-y); }", "light")
    with pytest.raises(ValueError, match="theme must be one of"):
        theme.resolve("", "sepia")


def chart() -> str:
    steps = np.arange(1, 30)
    return line_chart({"loss <b>&": (steps, 5 / steps, "#1f77b4")}, title="loss", x_title="step", y_title="loss")


def test_the_export_holds_its_theme_and_names_only_shipped_fonts(tmp_path):
    light = export.save_figure(chart(), tmp_path / "light.svg", css=all_css()).read_text()
    dark = export.save_figure(chart(), tmp_path / "dark.svg", theme="dark", css=all_css()).read_text()
    assert light != dark and "<style>" in light and "var(" not in light + dark
    assert theme.THEMES["dark"]["--jp-ui-font-color1"] in dark and theme.THEMES["light"]["--jp-ui-font-color1"] in light
    assert font_families(light) <= shipped_families() | GENERIC, font_families(light)
    assert "loss &lt;b&gt;&amp;" in light  # the series name stays escaped


def corner(png: Path) -> tuple[int, int, int]:
    return Image.open(io.BytesIO(png.read_bytes())).convert("RGB").getpixel((1, 1))


def hex_rgb(value: str) -> tuple[int, int, int]:
    return tuple(int(value[i:i + 2], 16) for i in (1, 3, 5))


@pytest.mark.parametrize("name", ["light", "dark"])
def test_the_png_is_drawn_on_the_theme_ground_with_readable_text(name, tmp_path):
    png = export.save_figure(chart(), tmp_path / f"{name}.png", theme=name, css=all_css())
    image = np.asarray(Image.open(png).convert("RGB"), dtype=int)
    ground = np.array(hex_rgb(theme.background(name)))
    assert corner(png) == tuple(ground)
    ink = np.array(hex_rgb(theme.THEMES[name]["--jp-ui-font-color1"]))
    # the title's glyphs are drawn in the theme's text colour: some pixels of the top band are (nearly) that colour
    band = image[:24].reshape(-1, 3)
    assert (np.abs(band - ink).sum(axis=1) < 40).sum() > 20


def test_text_is_drawn_with_the_shipped_fonts_only(tmp_path):
    """resvg gets no system font: a text in a family nobody ships still draws (in DejaVu Sans, the default), and the
    same text in sans-serif gives the same pixels."""
    def draw(family: str) -> bytes:
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="120" height="30"><text x="4" y="20" '
               f'font-family="{family}" font-size="16">Hg → ⊙</text></svg>')
        return export.svg_to_png(svg)

    sans = draw("sans-serif")
    assert draw("Times New Roman") == sans == draw(export.SANS)
    pixels = np.asarray(Image.open(io.BytesIO(sans)).convert("L"))
    assert (pixels < 128).sum() > 50  # glyphs were drawn, not boxes of nothing


@pytest.mark.parametrize("scale", [0, -1, float("nan")])
def test_a_bad_scale_or_suffix_is_refused(scale, tmp_path):
    with pytest.raises(ValueError, match="scale"):
        export.save_figure(chart(), tmp_path / "x.png", scale=scale)
    with pytest.raises(ValueError, match=r"\.svg or \.png"):
        export.save_figure(chart(), tmp_path / "x.jpg")
