"""Reading a heatmap's drawing back: its cell colours (one <rect> each, or the pixels of its embedded PNG), its cell
area and the texts of a class, so tests check the picture itself rather than the code that drew it."""

from __future__ import annotations

import base64
import struct
import xml.etree.ElementTree as ET
import zlib

import numpy as np

SVG = "{http://www.w3.org/2000/svg}"


def png_chunks(data: bytes) -> dict[bytes, bytes]:
    """The chunks of a PNG by kind (IDAT joined), each CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks: dict[bytes, bytes] = {}
    at = 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at: at + 8])
        body = data[at + 8: at + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[at + 8 + length: at + 12 + length])[0]
        chunks[kind] = chunks.get(kind, b"") + body
        at += 12 + length
    return chunks


def png_pixels(data: bytes) -> np.ndarray:
    """The (height, width, 3) colours of an 8-bit palette PNG whose rows are unfiltered (as figures.heatmap.png)."""
    chunks = png_chunks(data)
    width, height, depth, colour_type = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour_type) == (8, 3)
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, width + 1)
    assert (rows[:, 0] == 0).all()
    palette = np.frombuffer(chunks[b"PLTE"], np.uint8).reshape(-1, 3)
    return palette[rows[:, 1:]]


def cell_area(svg: str) -> ET.Element:
    """The element with class bvl-cells (a <g> of rects or one <image>)."""
    found = [node for node in ET.fromstring(svg).iter() if "bvl-cells" in (node.get("class") or "").split()]
    assert len(found) == 1, f"{len(found)} cell areas"
    return found[0]


def drawn_colours(svg: str) -> np.ndarray:
    """The (rows, cols, 3) uint8 colour of every cell as the drawing shows it."""
    area = cell_area(svg)
    rows, cols = int(area.get("data-rows")), int(area.get("data-cols"))
    if area.tag == f"{SVG}image":
        return png_pixels(base64.b64decode(area.get("href").split(",", 1)[1])).reshape(rows, cols, 3)
    x0, y0 = float(area.get("data-x")), float(area.get("data-y"))
    cell_w, cell_h = float(area.get("data-cell-w")), float(area.get("data-cell-h"))
    colours = np.full((rows, cols, 3), -1, np.int16)
    for rect in area.iter(f"{SVG}rect"):
        r, c = round((float(rect.get("y")) - y0) / cell_h), round((float(rect.get("x")) - x0) / cell_w)
        fill = rect.get("fill")
        colours[r, c] = [int(fill[i: i + 2], 16) for i in (1, 3, 5)]
    assert (colours >= 0).all(), "a cell without a rect"
    return colours.astype(np.uint8)


def texts(svg: str, css_class: str) -> list[str]:
    """The texts of the drawing that have `css_class`, XML entities decoded."""
    return ["".join(node.itertext()) for node in ET.fromstring(svg).iter(f"{SVG}text")
            if css_class in (node.get("class") or "").split()]


def near_colours(full: np.ndarray, top: float) -> list[np.ndarray]:
    """The colours a linear scale up to `top` gives each cell, one code step down, exact and up (rounding), each
    (rows, cols, 3); a cell above `top` (clipped) in the overflow colour."""
    from bertviz_lab.widgets.figures import attention_data as D

    codes = np.rint(np.asarray(full, np.float64).clip(0, top) / top * D.TOP_CODE).astype(int)
    over = np.asarray(full) > top
    return [D.HEATMAP_PALETTE[np.where(over, D.OVER_CODE, np.clip(codes + step, 0, D.TOP_CODE))]
            for step in (-1, 0, 1)]


def drawn_as(svg: str, colours: list[np.ndarray]) -> np.ndarray:
    """(rows, cols) bool: each cell drawn in one of the colours given for it."""
    drawn = drawn_colours(svg)
    return np.any([(drawn == c).all(axis=-1) for c in colours], axis=0)
