import { showFigure, tooltip, typed, redrawScheduler, svgEl } from "./shared.js";
// Live training curves: the kernel's drawing (the `svg` trait, the same figure the static copy and exports hold), and
// a hover that needs no kernel: each chart's plot frame (class bvl-plot) carries its data ranges (data-x0, data-x1,
// data-y0, data-y1, data-log-y) and series keys (data-keys), and its x, y, width and height are its pixel box; the
// values come from the synced float32 (x, y) series.

// The plot frame's ranges, pixel box and series keys, read from its attributes.
export function plotOf(frame) {
  const number = (name) => parseFloat(frame.getAttribute(name));
  const keys = (frame.getAttribute("data-keys") || "").split(" ").filter(Boolean);
  return { x0: number("data-x0"), x1: number("data-x1"), y0: number("data-y0"), y1: number("data-y1"),
    logY: frame.getAttribute("data-log-y") === "1", left: number("x"), top: number("y"),
    width: number("width"), height: number("height"), keys };
}

// The step under a pointer `fraction` (0 at the plot's left edge, 1 at its right) of the way across the plot;
// null outside it or before the chart has data.
export function stepAt(fraction, plot) {
  if (!(fraction >= 0 && fraction <= 1) || !Number.isFinite(plot.x0) || !Number.isFinite(plot.x1)) return null;
  return plot.x0 + fraction * (plot.x1 - plot.x0);
}

// The horizontal pixel (in the chart's own units) of step `x`.
export function xPixel(x, plot) {
  return plot.left + ((x - plot.x0) / (plot.x1 - plot.x0)) * plot.width;
}

// The pixel (in the chart's own units) of a data point, or null where the chart cannot draw it (log of <= 0).
export function pixelOf(x, y, plot) {
  const value = plot.logY ? (y > 0 ? Math.log10(y) : NaN) : y;
  if (!Number.isFinite(value) || plot.x1 === plot.x0 || plot.y1 === plot.y0) return null;
  return [xPixel(x, plot), plot.top + plot.height - ((value - plot.y0) / (plot.y1 - plot.y0)) * plot.height];
}

// The index of the (x, y) pair of interleaved `xy` (x ascending) whose x is nearest `x`; -1 when there is none.
export function nearestIndex(xy, x) {
  const count = Math.floor(xy.length / 2);
  if (!count) return -1;
  let low = 0, high = count - 1;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (xy[2 * middle] < x) low = middle + 1;
    else high = middle;
  }
  return low > 0 && Math.abs(xy[2 * (low - 1)] - x) <= Math.abs(xy[2 * low] - x) ? low - 1 : low;
}

// A value as the hover box shows it: 3 significant digits, scientific notation for very small or large ones.
export function formatValue(value) {
  const size = Math.abs(value);
  if (!Number.isFinite(value)) return String(value);
  if (size !== 0 && (size < 1e-3 || size >= 1e5)) return value.toExponential(2);
  return String(+value.toPrecision(3));
}

// What the hover box says near `step`: the drawn step nearest it, and one line per series that has points, its value
// at its nearest point (and that point's step where it is not the shown one, e.g. an evaluation every 25 steps);
// null when no series has a point.
export function hoverLines(step, series) {
  const lines = [];
  let shown = null;
  for (const { name, xy } of series) {
    const index = nearestIndex(xy, step);
    if (index < 0) continue;
    const x = xy[2 * index], y = xy[2 * index + 1];
    if (shown === null || Math.abs(x - step) < Math.abs(shown - step)) shown = x;
    lines.push({ name, x, y });
  }
  if (shown === null) return null;
  return { step: shown, lines: [`step ${formatValue(shown)}`,
    ...lines.map(({ name, x, y }) => `${name}: ${formatValue(y)}` + (x === shown ? "" : ` (step ${formatValue(x)})`))] };
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "bvl-loss-curves bvl-view";
  const tip = tooltip();
  el.append(root, tip);
  el.classList.add("bvl-loss-curves-host");

  const cache = new Map();  // series key -> Float32Array, parsed on first hover after a change
  const series = (key) => {
    if (!cache.has(key)) cache.set(key, typed(model.get(key), Float32Array));
    return cache.get(key);
  };
  let pointer = null;  // the last pointer position over the figure, so a redraw keeps the hover in place

  function hide() {
    root.querySelectorAll(".bvl-cursor, .bvl-cursor-dot").forEach((mark) => mark.remove());
    tip.style.display = "none";
  }

  function hover() {
    hide();
    if (!pointer) return;
    const target = document.elementFromPoint(pointer.x, pointer.y);
    const chart = target && root.contains(target) ? target.closest("svg[data-chart]") : null;
    const frame = chart && chart.querySelector(".bvl-plot");
    if (!frame) return;
    const plot = plotOf(frame), box = frame.getBoundingClientRect();
    const step = stepAt((pointer.x - box.left) / box.width, plot);
    if (step === null) return;
    const names = model.get("names") || {};
    const shown = plot.keys.map((key) => ({ key, name: names[key] || key, xy: series(key) }));
    const hovered = hoverLines(step, shown);
    if (!hovered) return;
    const at = xPixel(hovered.step, plot);
    svgEl(chart, "line", { class: "bvl-cursor", x1: at, x2: at, y1: plot.top, y2: plot.top + plot.height });
    for (const { key, xy } of shown) {
      const index = nearestIndex(xy, step);
      const dot = index < 0 ? null : pixelOf(xy[2 * index], xy[2 * index + 1], plot);
      const line = chart.querySelector(`polyline[data-key="${CSS.escape(key)}"]`);
      if (dot && line) svgEl(chart, "circle", { class: "bvl-cursor-dot", cx: dot[0], cy: dot[1], r: 3.5,
        fill: line.getAttribute("stroke") });
    }
    tip.textContent = hovered.lines.join("\n");
    const host = el.getBoundingClientRect();
    tip.style.display = "block";
    tip.style.left = `${pointer.x - host.left + 14}px`;
    tip.style.top = `${pointer.y - host.top + 14}px`;
  }

  function draw() {
    showFigure(root, model.get("svg"));
    hover();
  }
  const schedule = redrawScheduler(draw);
  const keys = Object.keys(model.get("names") || {});
  const forget = keys.map((key) => [`change:${key}`, () => { cache.delete(key); if (pointer) hover(); }]);
  model.on("change:svg", schedule);
  for (const [name, handler] of forget) model.on(name, handler);
  const move = (event) => { pointer = { x: event.clientX, y: event.clientY }; hover(); };
  const leave = () => { pointer = null; hide(); };
  root.addEventListener("pointermove", move);
  root.addEventListener("pointerleave", leave);
  draw();
  return () => {
    model.off("change:svg", schedule);
    for (const [name, handler] of forget) model.off(name, handler);
    root.removeEventListener("pointermove", move);
    root.removeEventListener("pointerleave", leave);
  };
}

export default { render };
