"""A caption line under an exported figure: which model and which text it shows, so a figure in a paper says so.

The line is part of the drawing (one SVG <text> under the figure, the root's height and viewBox grown to hold it), so
an SVG and a PNG of the same figure carry the same caption. Its text is escaped; a long text is cut at a word with an
ellipsis, and the whole line is cut to the figure's width.
"""

from __future__ import annotations

import re

from bertviz_lab.widgets.figures.text import escape, text_width

CAPTION_SIZE = 12  # font size of the caption line, px
CAPTION_HEIGHT = 22  # px the figure grows by to hold it
CAPTION_TEXT_CHARS = 60  # the quoted text is cut to about this many characters
CAPTION_MARGIN = 8  # px from the figure's left edge (and kept free at its right)
_ROOT_SIZE = re.compile(r'(?<![\w-])(width|height)="([\d.]+)"')
_VIEW_BOX = re.compile(r'\bviewBox="\s*([-\d.eE]+)[\s,]+([-\d.eE]+)[\s,]+([\d.eE]+)[\s,]+([\d.eE]+)\s*"')


def shortened(text: str, limit: int = CAPTION_TEXT_CHARS) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters, ending with "…" when cut."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + "…"


def caption_line(model: str, text: str | None, text_b: str | None = None) -> str:
    """"all-MiniLM-L6-v2 · “The cat sat on the…”": the model's name and the (shortened) text, either may be empty."""
    parts = [model.strip()] if model and model.strip() else []
    if text and text.strip():
        quoted = f"“{shortened(text)}”"
        if text_b and text_b.strip():
            quoted += f" / “{shortened(text_b, CAPTION_TEXT_CHARS // 2)}”"
        parts.append(quoted)
    return " · ".join(parts)


def fitted(line: str, width: float) -> str:
    """`line` cut with "…" so that it draws within `width` pixels at the caption's size."""
    if text_width(line, CAPTION_SIZE) <= width:
        return line
    while line and text_width(line + "…", CAPTION_SIZE) > width:
        line = line[:-1]
    return line.rstrip() + "…"


def with_caption(svg: str, line: str) -> str:
    """The SVG document grown by one line at its bottom holding `line` (escaped); unchanged for an empty line."""
    line = " ".join(str(line).split())
    if not line:
        return svg
    start = svg.index("<svg")
    end = svg.index(">", start) + 1
    root = svg[start:end]
    sizes = {name: float(value) for name, value in _ROOT_SIZE.findall(root)}
    if "width" not in sizes or "height" not in sizes:
        raise ValueError("the figure's <svg> element has no width and height attributes")
    width, height = sizes["width"], sizes["height"]
    box = _VIEW_BOX.search(root)
    x0, y0, box_w, box_h = (float(v) for v in box.groups()) if box else (0.0, 0.0, width, height)
    per_px = box_h / height if height else 1.0  # viewBox units per pixel, vertically
    grown = height + CAPTION_HEIGHT
    new_root = _ROOT_SIZE.sub(lambda m: f'height="{grown:g}"' if m.group(1) == "height" else m.group(0), root, count=2)
    new_box = f'viewBox="{x0:g} {y0:g} {box_w:g} {box_h + CAPTION_HEIGHT * per_px:g}"'
    new_root = _VIEW_BOX.sub(new_box, new_root, count=1) if box else new_root.replace("<svg", f"<svg {new_box}", 1)
    text = fitted(line, width - 2 * CAPTION_MARGIN)
    x = x0 + CAPTION_MARGIN * (box_w / width if width else 1.0)
    y = y0 + (height + CAPTION_HEIGHT - 7) * per_px
    caption = (f'<text class="bvl-caption bvl-muted" x="{x:g}" y="{y:g}" font-size="{CAPTION_SIZE * per_px:g}" '
               f'font-family="DejaVu Sans" font-style="normal">{escape(text)}</text>')
    close = svg.rindex("</svg>")
    return svg[:start] + new_root + svg[end:close] + caption + svg[close:]
