// What every view's front end shares; front_end.py puts it before each module (anywidget loads one module a view).
const SVG_NS = "http://www.w3.org/2000/svg";

// An SVG element with its attributes (and text, always as textContent), appended to `parent`.
function svgEl(parent, name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  parent.appendChild(node);
  return node;
}

// The hover box a view shows beside a cell (hidden until a pointer is over one; text only, never HTML).
function tooltip() {
  const tip = document.createElement("div");
  tip.className = "bvl-tooltip";
  tip.style.cssText = "position: absolute; display: none; pointer-events: none; white-space: pre; z-index: 2;" +
    "background: rgba(255,255,255,0.95); border: 1px solid #888; border-radius: 3px; padding: 3px 6px;" +
    "font: 12px system-ui, sans-serif; color: #111;";
  return tip;
}

// A synced Bytes trait arrives as a DataView (or ArrayBuffer): its bytes as a Uint8Array.
function bytes(value) {
  if (!value) return new Uint8Array(0);
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}

// A vertical colour bar in `parent`: palette codes 0..topCode stacked bottom to top in 128 bands (as the exported
// SVG draws it), ticks [position 0..1, label] on its right, and its title turned along it.
function verticalColorbar(parent, x, y, w, h, palette, topCode, ticks, title, fontSize) {
  const bar = svgEl(parent, "g", { class: "bvl-colorbar" });
  const bands = 128;
  for (let band = 0; band < bands; band++) {
    const code = Math.round((band * topCode) / (bands - 1));
    const y0 = y + h * (1 - (band + 1) / bands), y1 = y + h * (1 - band / bands);
    svgEl(bar, "rect", { x, y: y0, width: w, height: y1 - y0 + 0.3, "shape-rendering": "crispEdges",
      fill: `rgb(${palette[3 * code]},${palette[3 * code + 1]},${palette[3 * code + 2]})` });
  }
  svgEl(bar, "rect", { x, y, width: w, height: h, fill: "none", stroke: "#888", "stroke-width": 0.5 });
  let widest = 1;
  for (const [position, label] of ticks) {
    const ty = y + h * (1 - position);
    svgEl(bar, "line", { x1: x + w, y1: ty, x2: x + w + 4, y2: ty, stroke: "#555" });
    svgEl(bar, "text", { class: "bvl-colorbar-tick", x: x + w + 6, y: ty + 4, "font-size": fontSize }, label);
    widest = Math.max(widest, label.length);
  }
  const cx = x + w + 6 + Math.ceil(widest * 6.7) + 6 + 12, cy = y + h / 2;
  svgEl(bar, "text", { class: "bvl-colorbar-title", transform: `translate(${cx},${cy}) rotate(90)`,
    "text-anchor": "middle", "font-size": 12, "font-family": "sans-serif" }, title);
  return bar;
}
