import { showFigure, stepIndex, tooltip, typed, redrawScheduler, svgEl, keepKeysInPanel } from "./shared.js";
// Live training curves: the kernel's drawing (the `svg` trait, the same figure the static copy and exports hold), and
// a hover that needs no kernel: each chart's plot frame (class bvl-plot) carries its data ranges (data-x0, data-x1,
// data-y0, data-y1, data-log-y) and series keys (data-keys), and its x, y, width and height are its pixel box; the
// values come from the synced float32 (x, y) series.
// The keyboard reads the same values: the curves are one tab stop; the left and right arrows (Home, End, the page
// keys ten at a time) move a step cursor over the drawn steps of a chart, the up and down arrows to the chart before
// or after, Escape hides the cursor. The hover box shows what hover shows, beside the cursor.

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

// Every step a chart draws a point at, ascending and once each, from its series' interleaved (x, y) pairs.
export function chartSteps(seriesXY) {
  const steps = new Set();
  for (const xy of seriesXY) for (let i = 0; i + 1 < xy.length; i += 2) steps.add(xy[i]);
  return [...steps].sort((a, b) => a - b);
}

// Where a key moves the keyboard's cursor: {chart, step} (indices) among `charts` charts and `steps` steps of the
// current one (-1: no step yet), or null for a key that does not move it. Up and down change the chart (the cursor
// goes to the same step there), the others move along the steps.
export function nextCursor({ chart, step }, key, charts, steps) {
  if (key === "ArrowUp" || key === "ArrowDown") {
    if (!charts) return null;
    return { chart: Math.max(0, Math.min(charts - 1, chart + (key === "ArrowDown" ? 1 : -1))), step };
  }
  if (step < 0 && ["ArrowRight", "ArrowLeft", "PageDown", "PageUp"].includes(key)) {
    return steps ? { chart, step: key === "ArrowRight" || key === "PageDown" ? 0 : steps - 1 } : null;
  }
  const to = stepIndex(step, key, steps, 10);
  return to === null ? null : { chart, step: to };
}

function render({ model, el }) {
  keepKeysInPanel(el);
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
  let keys = null;  // the keyboard's cursor {chart, at}: the chart's index, the step it is at

  function hide() {
    root.querySelectorAll(".bvl-cursor, .bvl-cursor-dot").forEach((mark) => mark.remove());
    tip.style.display = "none";
  }

  function charts() {
    return [...root.querySelectorAll("svg[data-chart]")].filter((chart) => chart.querySelector(".bvl-plot"));
  }

  function shownSeries(plot) {
    const names = model.get("names") || {};
    return plot.keys.map((key) => ({ key, name: names[key] || key, xy: series(key) }));
  }

  // the cursor line, a dot on each series and the hover box at `step` of `chart`; the box at (x, y) in page pixels,
  // or beside the cursor line where they are not given
  function mark(chart, step, x, y) {
    const frame = chart.querySelector(".bvl-plot");
    const plot = plotOf(frame), shown = shownSeries(plot);
    const hovered = hoverLines(step, shown);
    if (!hovered) return false;
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
    const host = el.getBoundingClientRect(), box = frame.getBoundingClientRect();
    if (x === undefined) {
      x = box.left + ((at - plot.left) / plot.width) * box.width;
      y = box.top + box.height / 3;
    }
    tip.style.display = "block";
    tip.style.left = `${x - host.left + 14}px`;
    tip.style.top = `${y - host.top + 14}px`;
    return true;
  }

  function hover() {
    hide();
    if (!pointer) return;
    const target = document.elementFromPoint(pointer.x, pointer.y);
    const chart = target && root.contains(target) ? target.closest("svg[data-chart]") : null;
    const frame = chart && chart.querySelector(".bvl-plot");
    if (!frame) return;
    const box = frame.getBoundingClientRect();
    const step = stepAt((pointer.x - box.left) / box.width, plotOf(frame));
    if (step !== null) mark(chart, step, pointer.x, pointer.y);
  }

  // the steps the chart at `index` draws, and that chart (none: [], null)
  function stepsOf(index) {
    const chart = charts()[index];
    if (!chart) return { chart: null, steps: [] };
    return { chart, steps: chartSteps(shownSeries(plotOf(chart.querySelector(".bvl-plot"))).map(({ xy }) => xy)) };
  }

  // the index of the step nearest `at` among `steps` (-1 where there is no step or no `at`)
  function nearestStep(steps, at) {
    if (at === null || !steps.length) return -1;
    return steps.reduce((best, value, i) => (Math.abs(value - at) < Math.abs(steps[best] - at) ? i : best), 0);
  }

  // the keyboard's cursor drawn again (after a key or a redraw): at its step, or the nearest one the chart draws
  function showKeys() {
    if (!keys || pointer) return;
    hide();
    const { chart, steps } = stepsOf(keys.chart);
    const index = nearestStep(steps, keys.at);
    if (!chart || index < 0) return;
    keys.at = steps[index];
    root.dataset.cursor = `${keys.chart}:${keys.at}`;
    mark(chart, keys.at);
  }

  function onKey(event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key === "Escape" && keys) {
      keys = null;
      delete root.dataset.cursor;
      hide();
      event.preventDefault();
      return;
    }
    const current = keys || { chart: 0, at: null };
    const { steps } = stepsOf(current.chart);
    const to = nextCursor({ chart: current.chart, step: nearestStep(steps, current.at) }, event.key, charts().length,
      steps.length);
    if (!to) return;
    event.preventDefault();
    event.stopPropagation(); // the notebook's own keys (arrows move between cells) stay out
    keys = { chart: to.chart, at: to.chart === current.chart && to.step >= 0 ? steps[to.step] : current.at };
    if (keys.at === null) { // a first key that changes the chart: its first step
      const first = stepsOf(to.chart).steps;
      keys.at = first.length ? first[0] : null;
    }
    showKeys();
  }

  function draw() {
    showFigure(root, model.get("svg"));
    if (pointer) hover();
    else showKeys();
  }
  const schedule = redrawScheduler(draw);
  const seriesKeys = Object.keys(model.get("names") || {});
  const forget = seriesKeys.map((key) => [`change:${key}`, () => { cache.delete(key); if (pointer) hover(); }]);
  model.on("change:svg", schedule);
  for (const [name, handler] of forget) model.on(name, handler);
  const move = (event) => { pointer = { x: event.clientX, y: event.clientY }; hover(); };
  const leave = () => { pointer = null; hide(); showKeys(); };
  const blur = () => { keys = null; delete root.dataset.cursor; if (!pointer) hide(); };
  root.tabIndex = 0;
  root.setAttribute("role", "group");
  root.setAttribute("aria-label", "training curves: left and right arrows move along the steps, up and down " +
    "between the charts, the values are read out; Escape hides them");
  tip.setAttribute("aria-live", "polite");
  root.addEventListener("pointermove", move);
  root.addEventListener("pointerleave", leave);
  root.addEventListener("keydown", onKey);
  root.addEventListener("focusout", blur);
  draw();
  return () => {
    model.off("change:svg", schedule);
    for (const [name, handler] of forget) model.off(name, handler);
    root.removeEventListener("pointermove", move);
    root.removeEventListener("pointerleave", leave);
    root.removeEventListener("keydown", onKey);
    root.removeEventListener("focusout", blur);
  };
}

export default { render };
