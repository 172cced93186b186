"""Browser-side attention views (anywidget): the bertviz-style head view and the all-layers model view.

Both receive compact binary buffers (8-bit weights, 16-bit indices) and draw with SVG/canvas; token text is
always set with textContent, never parsed as HTML.
"""

from __future__ import annotations

import anywidget
import traitlets

HEAD_VIEW_ESM = r"""
function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "bvl-head-view";
  root.style.cssText = "font: 12px monospace; overflow: auto; max-height: 640px; position: relative;";
  el.appendChild(root);
  const SVG = "http://www.w3.org/2000/svg";

  function draw() {
    root.replaceChildren();
    const queries = model.get("query_tokens"), keys = model.get("key_tokens");
    const heads = model.get("heads"), colors = model.get("colors"), k = model.get("k");
    const idxView = model.get("indices"), wView = model.get("weights");
    const idx = new Uint16Array(idxView.buffer.slice(idxView.byteOffset, idxView.byteOffset + idxView.byteLength));
    const w = new Uint8Array(wView.buffer, wView.byteOffset, wView.byteLength);
    const rowH = 18, colW = 140, gap = 180, top = 8;
    const height = top * 2 + Math.max(queries.length, keys.length) * rowH;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("width", colW * 2 + gap);
    svg.setAttribute("height", height);
    root.appendChild(svg);
    const lines = document.createElementNS(SVG, "g");
    svg.appendChild(lines);
    const all = [];
    for (let h = 0; h < heads.length; h++) {
      for (let q = 0; q < queries.length; q++) {
        for (let j = 0; j < k; j++) {
          const at = (h * queries.length + q) * k + j, weight = w[at] / 255;
          if (weight < 0.01) continue;
          const line = document.createElementNS(SVG, "line");
          line.setAttribute("x1", colW); line.setAttribute("y1", top + q * rowH + rowH / 2);
          line.setAttribute("x2", colW + gap); line.setAttribute("y2", top + idx[at] * rowH + rowH / 2);
          line.setAttribute("stroke", colors[h % colors.length]);
          line.setAttribute("stroke-width", 2);
          line.setAttribute("stroke-opacity", weight);
          line.dataset.q = q; line.dataset.key = idx[at];
          lines.appendChild(line); all.push(line);
        }
      }
    }
    function label(text, x, y, anchor, side, index) {
      const t = document.createElementNS(SVG, "text");
      t.textContent = text;
      t.setAttribute("x", x); t.setAttribute("y", y + rowH / 2 + 4);
      t.setAttribute("text-anchor", anchor);
      t.setAttribute("class", "bvl-token bvl-" + side);
      t.style.cursor = "default";
      t.addEventListener("mouseenter", () => {
        for (const line of all) {
          const mine = side === "query" ? line.dataset.q == index : line.dataset.key == index;
          line.style.display = mine ? "" : "none";
        }
        t.style.fontWeight = "bold";
      });
      t.addEventListener("mouseleave", () => { for (const line of all) line.style.display = ""; t.style.fontWeight = ""; });
      svg.appendChild(t);
    }
    queries.forEach((tok, i) => label(tok, colW - 6, top + i * rowH, "end", "query", i));
    keys.forEach((tok, i) => label(tok, colW + gap + 6, top + i * rowH, "start", "key", i));
    const legend = document.createElement("div");
    legend.className = "bvl-head-legend";
    heads.forEach((h, i) => {
      const chip = document.createElement("span");
      chip.textContent = "head " + h;
      chip.style.cssText = "display:inline-block;margin:2px;padding:1px 5px;border-radius:4px;color:#fff;background:" + colors[i % colors.length];
      legend.appendChild(chip);
    });
    root.prepend(legend);
  }
  draw();
  for (const name of ["query_tokens", "key_tokens", "heads", "indices", "weights", "k"]) model.on("change:" + name, draw);
}
export default { render };
"""

MODEL_VIEW_ESM = r"""
function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "bvl-model-view";
  root.style.cssText = "font: 11px sans-serif; overflow: auto; max-height: 720px;";
  el.appendChild(root);

  function draw() {
    root.replaceChildren();
    const L = model.get("num_layers"), H = model.get("num_heads"), s = model.get("size");
    const view = model.get("thumbnails");
    const data = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    const grid = document.createElement("div");
    grid.style.cssText = "display:grid;gap:4px;grid-template-columns:auto repeat(" + H + ", 52px);align-items:center";
    grid.appendChild(document.createElement("span"));
    for (let h = 0; h < H; h++) {
      const head = document.createElement("span");
      head.textContent = "h" + h; head.style.textAlign = "center";
      grid.appendChild(head);
    }
    const selected = model.get("selected") || [-1, -1];
    for (let l = 0; l < L; l++) {
      const name = document.createElement("span");
      name.textContent = "layer " + l;
      grid.appendChild(name);
      for (let h = 0; h < H; h++) {
        const canvas = document.createElement("canvas");
        canvas.width = s; canvas.height = s;
        canvas.className = "bvl-thumb";
        canvas.title = "layer " + l + ", head " + h + " (click to open)";
        canvas.style.cssText = "width:52px;height:52px;image-rendering:pixelated;cursor:pointer;border:2px solid " +
          (selected[0] === l && selected[1] === h ? "#d62728" : "#ddd");
        const ctx = canvas.getContext("2d"), image = ctx.createImageData(s, s);
        const base = (l * H + h) * s * s;
        for (let i = 0; i < s * s; i++) {
          const v = data[base + i] / 255;
          image.data[4 * i] = 255 - 225 * v; image.data[4 * i + 1] = 255 - 155 * v;
          image.data[4 * i + 2] = 255; image.data[4 * i + 3] = 255;
        }
        ctx.putImageData(image, 0, 0);
        canvas.addEventListener("click", () => { model.set("selected", [l, h]); model.save_changes(); });
        grid.appendChild(canvas);
      }
    }
    root.appendChild(grid);
  }
  draw();
  for (const name of ["thumbnails", "num_layers", "num_heads", "size", "selected"]) model.on("change:" + name, draw);
}
export default { render };
"""


class HeadView(anywidget.AnyWidget):
    """Query tokens on the left, key tokens on the right, a line per (query, key) per head; opacity = weight."""

    _esm = HEAD_VIEW_ESM
    query_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    key_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    heads = traitlets.List(traitlets.Int()).tag(sync=True)
    colors = traitlets.List(traitlets.Unicode()).tag(sync=True)
    k = traitlets.Int(1).tag(sync=True)
    indices = traitlets.Bytes(b"").tag(sync=True)  # uint16 (heads, queries, k), key positions
    weights = traitlets.Bytes(b"").tag(sync=True)  # uint8 (heads, queries, k), 255 = probability 1


class ModelView(anywidget.AnyWidget):
    """Every layer × head as a thumbnail; clicking one sets `selected` = [layer, head]."""

    _esm = MODEL_VIEW_ESM
    num_layers = traitlets.Int(0).tag(sync=True)
    num_heads = traitlets.Int(0).tag(sync=True)
    size = traitlets.Int(1).tag(sync=True)
    thumbnails = traitlets.Bytes(b"").tag(sync=True)  # uint8 (layers, heads, size, size)
    selected = traitlets.List(traitlets.Int(), default_value=[0, 0]).tag(sync=True)
