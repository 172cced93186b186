"""Reading the head view's and the model view's drawings back: thumbnails' palette codes, data attributes, texts, and
the checks every drawing must pass (theme colours only, explicit ink that reads on its box)."""

from __future__ import annotations

import base64
import struct
import xml.etree.ElementTree as ET
import zlib

import numpy as np
from heatmap_drawing import png_chunks

from bertviz_lab.widgets.figures.contrast import contrast_ratio, ink_class

SVG = "{http://www.w3.org/2000/svg}"


def classes(node: ET.Element) -> list[str]:
    return (node.get("class") or "").split()


def png_codes(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The (height, width) palette indices and the (n, 3) palette of an 8-bit palette PNG with unfiltered rows."""
    chunks = png_chunks(data)
    width, height, depth, colour_type = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour_type) == (8, 3)
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, width + 1)
    assert (rows[:, 0] == 0).all()
    return rows[:, 1:], np.frombuffer(chunks[b"PLTE"], np.uint8).reshape(-1, 3)


def thumbnails(svg: str) -> tuple[np.ndarray, np.ndarray]:
    """The model view's thumbnails as drawn: codes (L, H, s, s) from each g.bvl-thumb's PNG, and their palette."""
    root = ET.fromstring(svg)
    found = {}
    palettes = []
    for thumb in root.iter(f"{SVG}g"):
        if "bvl-thumb" in classes(thumb):
            (image,) = thumb.iter(f"{SVG}image")
            codes, palette = png_codes(base64.b64decode(image.get("href").split(",", 1)[1]))
            found[int(thumb.get("data-layer")), int(thumb.get("data-head"))] = codes
            palettes.append(palette)
    layers, heads = int(root.get("data-layers")), int(root.get("data-heads"))
    assert sorted(found) == [(layer, head) for layer in range(layers) for head in range(heads)]
    assert all((p == palettes[0]).all() for p in palettes)
    return np.stack([np.stack([found[layer, head] for head in range(heads)]) for layer in range(layers)]), palettes[0]


def texts(svg: str, css_class: str) -> list[str]:
    """The texts with `css_class`, without their <title> tooltips, XML entities decoded."""
    return [(node.text or "") for node in ET.fromstring(svg).iter(f"{SVG}text") if css_class in classes(node)]


def groups(svg: str, css_class: str) -> list[ET.Element]:
    return [node for node in ET.fromstring(svg).iter(f"{SVG}g") if css_class in classes(node)]


def assert_themed_drawing(svg: str, name: str) -> int:
    """One standalone SVG of the figure `name` that takes its look from the stylesheets: root classes, the theme's
    ground first, no font-family attribute, no text colour but an explicit ink (its class) that reads on its box.
    Returns how many texts carry such an ink."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and classes(root)[:2] == ["bvl-fig", f"bvl-{name}"]
    assert float(root.get("width")) > 0 and float(root.get("height")) > 0
    first = root[0]
    assert first.tag == f"{SVG}rect" and classes(first) == ["bvl-ground"] and first.get("fill") is None
    assert not [node for node in root.iter() if node.get("font-family") is not None]
    assert not [node for node in root.iter() if "fill:" in (node.get("style") or "")]
    inked = 0
    for parent in root.iter():
        box = None  # the last filled shape before a text in the same group: what the text is drawn on
        for child in parent:
            if child.tag == f"{SVG}rect" and (child.get("fill") or "none").startswith("#"):
                box = child.get("fill")
            elif child.tag == f"{SVG}text" and child.get("fill") is not None:
                ink = child.get("fill")
                assert box is not None, f"text {child.text!r} has its own colour {ink} but no box under it"
                assert ink_class(ink) in classes(child), f"text {child.text!r}: ink {ink} without its class"
                assert contrast_ratio(ink, box) >= 4.5, f"text {child.text!r}: {ink} on {box}"
                inked += 1
    return inked


def tokens(svg: str, side: str) -> list[str]:
    """The head view's token labels of one side ("query" or "key"), in row order as data-index says."""
    found = {int(node.get("data-index")): node.text or "" for node in ET.fromstring(svg).iter(f"{SVG}text")
             if node.get("data-side") == side}
    assert sorted(found) == list(range(len(found)))
    return [found[i] for i in range(len(found))]


def head_lines(svg: str) -> dict[tuple[int, int, int], float]:
    """The head view's lines: (head, query row, key row) -> opacity."""
    lines = {}
    for head in groups(svg, "bvl-head-lines"):
        for row in head:
            for line in row:
                key = (int(head.get("data-head")), int(row.get("data-q")), int(line.get("data-key")))
                assert key not in lines
                lines[key] = float(line.get("stroke-opacity"))
    return lines
