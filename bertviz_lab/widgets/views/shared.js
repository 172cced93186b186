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

// Draws now, then once after each batch of changes to the kernel's drawing (`svg`, and the other `traits` the drawing
// reads); returns the cleanup, what a view's render returns.
export function followDrawing(model, draw, traits = ["svg"]) {
  const schedule = redrawScheduler(draw);
  const events = traits.map((name) => `change:${name}`);
  for (const event of events) model.on(event, schedule);
  draw();
  return () => {
    for (const event of events) model.off(event, schedule);
  };
}

// A view's frame in `el`: the outer element (class `className`: its data- attributes say what it shows), the holder
// the figure is shown in, and the tooltip beside it, read out as it changes (the keyboard's reading).
export function viewFrame(el, className) {
  const outer = document.createElement("div");
  outer.className = className;
  const holder = document.createElement("div");
  const tip = tooltip();
  tip.setAttribute("aria-live", "polite");
  outer.append(holder, tip);
  el.appendChild(outer);
  return { outer, holder, tip };
}

// A number as hover shows it: 4 decimals, or 3 significant digits in scientific notation below 0.001.
export function weightText(value) {
  if (value === 0) return "0";
  if (!Number.isFinite(value)) return String(value);
  return Math.abs(value) >= 1e-3 ? value.toFixed(4) : value.toExponential(2);
}

// The index a key moves to from `current` among `count` items in a row or column: the arrows step one, Home and End
// go to the ends, PageUp and PageDown step `page` where it is given; null for a key that does not move.
export function stepIndex(current, key, count, page = 0) {
  if (!count) return null;
  const steps = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 };
  if (page) Object.assign(steps, { PageDown: page, PageUp: -page });
  const step = steps[key];
  if (step !== undefined) return Math.max(0, Math.min(count - 1, current + step));
  if (key === "Home") return 0;
  if (key === "End") return count - 1;
  return null;
}

// The first row of a window of `rows` among `count` that shows `query`, moved as little as it takes from `first`
// (as figures/head_view.py's window_first; a query of -1 moves nothing).
export function windowFirst(query, first, count, rows) {
  if (query >= first + rows) first = query - rows + 1;
  else if (query >= 0 && query < first) first = query;
  return Math.max(0, Math.min(first, count - rows));
}

export const WHEEL_ROWS = 3; // rows a window moves a wheel step

// The first row of a window of `rows` among `count` after a wheel step of `deltaY` from `first`, kept inside.
export function wheeledFirst(first, deltaY, count, rows) {
  return Math.max(0, Math.min(count - rows, first + Math.sign(deltaY) * WHEEL_ROWS));
}

// Places the hover box `tip` beside `node` (an element of a figure inside `frame`, the box's positioned parent):
// right of it where it fits in the frame's visible width, else left of it; just under its top.
export function tipBeside(tip, frame, node) {
  tip.style.display = "block";
  const area = frame.getBoundingClientRect(), rect = node.getBoundingClientRect();
  const left = rect.right - area.left + frame.scrollLeft + 8;
  const fits = left + tip.offsetWidth < frame.clientWidth + frame.scrollLeft;
  tip.style.left = (fits ? left : Math.max(0, rect.left - area.left + frame.scrollLeft - 8 - tip.offsetWidth)) + "px";
  tip.style.top = rect.top - area.top + frame.scrollTop + Math.min(rect.height, 24) + 4 + "px";
}

// A key pressed on `row`, one of the focusable `rows` of a list (a listed text, a match): Enter or Space opens it,
// the arrows, Home and End move the focus along the list. True when the key did something.
export function rowKey(event, rows, row, open) {
  if (event.key === "Enter" || event.key === " ") {
    event.preventDefault();
    open(row);
    return true;
  }
  const next = stepIndex(rows.indexOf(row), event.key, rows.length);
  if (next === null) return false;
  event.preventDefault();
  rows[next].focus();
  return true;
}

// Keys pressed while the focus is anywhere in a panel (a view, a tab, a button, a slider) belong to the panel:
// JupyterLab's and Notebook 7's command-mode shortcuts (a and b insert a cell, m makes it Markdown, the arrows move
// between cells, Enter edits one) would otherwise act on the notebook behind it. A key with Ctrl, Cmd or Alt, and
// Shift+Enter (run the cell), still reach the notebook. Lumino, which both run on, skips every shortcut for a key
// pressed on an element marked data-lm-suppress-shortcuts; a listener on the window, ahead of Lumino's (Notebook 7
// listens in the capture phase, JupyterLab in the bubbling one), marks the focused element for the length of one
// key press, so the panel's own handlers and the browser's defaults (typing, Tab, Space on a button) run as ever.
export const SUPPRESS = "data-lm-suppress-shortcuts";

export function keptByPanel(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || (event.shiftKey && event.key === "Enter")) return false;
  const target = event.target;
  return Boolean(target && target.closest && target.closest(".bvl-panel, [data-bvl-keys]"));
}

export function keepKeysInPanel(el, scope = globalThis) {
  el.dataset.bvlKeys = "kept"; // a view shown alone, outside any panel
  if (scope.bvlKeysKept) return;
  scope.bvlKeysKept = true;
  scope.addEventListener("keydown", (event) => {
    const target = event.target;
    if (!keptByPanel(event) || target.hasAttribute(SUPPRESS)) return;
    target.setAttribute(SUPPRESS, "true");
    setTimeout(() => target.removeAttribute(SUPPRESS), 0); // after every listener of this key press
  }, true);
}
