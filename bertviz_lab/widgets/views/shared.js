// What every view's front end shares. A view imports what it needs from "./shared.js"; anywidget loads one module a
// view, so front_end.py puts this file in place of that import (Node's test runner imports it as it is).
export const SVG_NS = "http://www.w3.org/2000/svg";

// An SVG element with its attributes (and text, always as textContent), appended to `parent`.
export function svgEl(parent, name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  parent.appendChild(node);
  return node;
}

// The hover box a view shows beside a cell (hidden until a pointer is over one; text only, never HTML). Its look is
// figure.css's .bvl-tooltip.
export function tooltip() {
  const tip = document.createElement("div");
  tip.className = "bvl-tooltip";
  return tip;
}

// A synced Bytes trait arrives as a DataView (or ArrayBuffer): its bytes as a Uint8Array.
export function bytes(value) {
  if (!value) return new Uint8Array(0);
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}

// A synced Bytes trait as a typed array of `Type` (copied, so it is aligned whatever the buffer's offset).
export function typed(value, Type) {
  const raw = bytes(value);
  return new Type(raw.slice().buffer, 0, Math.floor(raw.byteLength / Type.BYTES_PER_ELEMENT));
}

// Half-precision floats (IEEE 754 binary16, as NumPy's float16 writes them) as a Float32Array.
export function float16s(value) {
  const halves = typed(value, Uint16Array);
  const out = new Float32Array(halves.length);
  for (let i = 0; i < halves.length; i++) {
    const h = halves[i], sign = h & 0x8000 ? -1 : 1, exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
    if (exponent === 0) out[i] = sign * fraction * 2 ** -24;
    else if (exponent === 31) out[i] = fraction ? NaN : sign * Infinity;
    else out[i] = sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
  }
  return out;
}

// The figure the kernel drew (one SVG document, the same one the static copy and exports hold), parsed as XML and put
// in `container` in place of the previous one. Returns the new <svg> element, or null for an empty drawing. Parsing
// as XML runs nothing: the kernel escapes every token and text it puts in the drawing.
export function showFigure(container, svgText) {
  if (!svgText) {
    container.replaceChildren();
    return null;
  }
  const parsed = new DOMParser().parseFromString(svgText, "image/svg+xml");
  const figure = document.importNode(parsed.documentElement, true);
  container.replaceChildren(figure);
  return figure;
}

// Calls `draw` once after a batch of trait changes (one kernel message sets several traits at once).
export function redrawScheduler(draw) {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    queueMicrotask(() => {
      pending = false;
      draw();
    });
  };
}

// A number as hover shows it: 4 decimals, or 3 significant digits in scientific notation below 0.001.
export function weightText(value) {
  if (value === 0) return "0";
  if (!Number.isFinite(value)) return String(value);
  return Math.abs(value) >= 1e-3 ? value.toFixed(4) : value.toExponential(2);
}

// A vertical colour bar in `parent`: palette codes 0..topCode stacked bottom to top in 128 bands (as the exported
// SVG draws it), ticks [position 0..1, label] on its right, and its title turned along it.
export function verticalColorbar(parent, x, y, w, h, palette, topCode, ticks, title, fontSize) {
  const bar = svgEl(parent, "g", { class: "bvl-colorbar" });
  const bands = 128;
  for (let band = 0; band < bands; band++) {
    const code = Math.round((band * topCode) / (bands - 1));
    const y0 = y + h * (1 - (band + 1) / bands), y1 = y + h * (1 - band / bands);
    svgEl(bar, "rect", { x, y: y0, width: w, height: y1 - y0 + 0.3, "shape-rendering": "crispEdges",
      fill: `rgb(${palette[3 * code]},${palette[3 * code + 1]},${palette[3 * code + 2]})` });
  }
  svgEl(bar, "rect", { x, y, width: w, height: h, class: "bvl-rule", "stroke-width": 0.5 });
  let widest = 1;
  for (const [position, label] of ticks) {
    const ty = y + h * (1 - position);
    svgEl(bar, "line", { x1: x + w, y1: ty, x2: x + w + 4, y2: ty, class: "bvl-rule" });
    svgEl(bar, "text", { class: "bvl-colorbar-tick bvl-mono", x: x + w + 6, y: ty + 4, "font-size": fontSize }, label);
    widest = Math.max(widest, label.length);
  }
  const cx = x + w + 6 + Math.ceil(widest * 6.7) + 6 + 12, cy = y + h / 2;
  svgEl(bar, "text", { class: "bvl-colorbar-title", transform: `translate(${cx},${cy}) rotate(90)`,
    "text-anchor": "middle", "font-size": 12 }, title);
  return bar;
}
