// Live training curves: four small line charts drawn as SVG from the synced arrays alone (one float32 (x, y) buffer
// per series), so a page reload, a second tab or a reopened notebook with a live kernel draws the same curves again.
// Text is set with textContent.
const SVG = "http://www.w3.org/2000/svg";
const PAD = { left: 62, right: 14, top: 28, bottom: 58 };

function floats(view) {
  // (x, y) pairs as float32; the kernel sends bytes, which arrive as a DataView (or an ArrayBuffer)
  if (!view || !view.byteLength) return new Float32Array(0);
  const buffer = view.buffer || view;
  const offset = view.byteOffset || 0;
  return new Float32Array(buffer.slice(offset, offset + view.byteLength));
}

function niceTicks(low, high, count) {
  if (!(isFinite(low) && isFinite(high)) || high <= low) return [low];
  const raw = (high - low) / Math.max(1, count);
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const ticks = [];
  for (let v = Math.ceil(low / step - 1e-9) * step; v <= high + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
  return ticks;
}

function fmt(value) {
  const size = Math.abs(value);
  if (size !== 0 && (size < 1e-3 || size >= 1e5)) return value.toExponential(1);
  return String(+value.toPrecision(3));
}

function node(name, attrs, parent, text) {
  const item = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attrs)) item.setAttribute(key, value);
  if (text !== undefined) item.textContent = text;
  if (parent) parent.appendChild(item);
  return item;
}

function drawPanel(cell, panel, model, total) {
  const width = Math.max(260, Math.floor(cell.clientWidth || 420));
  const height = Math.max(200, Math.min(300, Math.round(width * 0.6)));
  const plotW = width - PAD.left - PAD.right, plotH = height - PAD.top - PAD.bottom;
  const svg = node("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "bvl-curve-panel",
    "font-family": "system-ui, sans-serif", "font-size": 12 });
  node("text", { x: width / 2, y: 17, "text-anchor": "middle", "font-weight": "bold", "font-size": 13,
    class: "bvl-chart-title" }, svg, panel.title);
  node("text", { x: PAD.left + plotW / 2, y: height - 24, "text-anchor": "middle", class: "bvl-axis-title bvl-x-title" },
    svg, panel.x_title);
  node("text", { transform: `translate(14,${PAD.top + plotH / 2}) rotate(-90)`, "text-anchor": "middle",
    class: "bvl-axis-title bvl-y-title" }, svg, panel.y_title);
  node("rect", { x: PAD.left, y: PAD.top, width: plotW, height: plotH, fill: "none", stroke: "#c8ccd4" }, svg);

  const series = panel.series.map((s) => ({ ...s, xy: floats(model.get(s.key)) }));
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const s of series) {
    for (let i = 0; i < s.xy.length; i += 2) {
      x0 = Math.min(x0, s.xy[i]); x1 = Math.max(x1, s.xy[i]);
      y0 = Math.min(y0, s.xy[i + 1]); y1 = Math.max(y1, s.xy[i + 1]);
    }
  }
  if (total > 0) { x0 = Math.min(x0, 0); x1 = Math.max(x1, total); }
  let legendX = PAD.left;
  for (const s of series) {  // the legend names every series, drawn or not yet
    const dash = s.dashed ? { "stroke-dasharray": "5,3" } : {};
    node("line", { x1: legendX, x2: legendX + 16, y1: height - 7, y2: height - 7, stroke: s.color, "stroke-width": 2,
      ...dash }, svg);
    const label = node("text", { x: legendX + 20, y: height - 3, class: "bvl-legend" }, svg, s.name);
    legendX += 30 + s.name.length * 6.5;
    label.dataset.key = s.key;
  }
  if (!isFinite(y0)) {
    node("text", { x: PAD.left + plotW / 2, y: PAD.top + plotH / 2, "text-anchor": "middle", fill: "#888" }, svg,
      "no data yet");
    return svg;
  }
  if (x1 === x0) { x0 -= 0.5; x1 += 0.5; }
  if (y1 === y0) { const pad = Math.abs(y0) * 0.1 || 0.5; y0 -= pad; y1 += pad; }
  const sx = (x) => PAD.left + (x - x0) / (x1 - x0) * plotW;
  const sy = (y) => PAD.top + plotH - (y - y0) / (y1 - y0) * plotH;
  for (const v of niceTicks(y0, y1, 4)) {
    node("line", { x1: PAD.left, x2: PAD.left + plotW, y1: sy(v), y2: sy(v), stroke: "#eef0f4" }, svg);
    node("text", { x: PAD.left - 4, y: sy(v) + 4, "text-anchor": "end", class: "bvl-tick" }, svg, fmt(v));
  }
  for (const v of niceTicks(x0, x1, 5)) {
    node("text", { x: sx(v), y: PAD.top + plotH + 15, "text-anchor": "middle", class: "bvl-tick" }, svg, fmt(v));
  }
  for (const s of series) {
    if (!s.xy.length) continue;
    const points = [];
    for (let i = 0; i < s.xy.length; i += 2) points.push(`${sx(s.xy[i]).toFixed(1)},${sy(s.xy[i + 1]).toFixed(1)}`);
    const line = node("polyline", { points: points.join(" "), fill: "none", stroke: s.color, "stroke-width": 1.6,
      class: "bvl-series", ...(s.dashed ? { "stroke-dasharray": "5,3" } : {}) }, svg);
    line.dataset.key = s.key;
    line.dataset.n = s.xy.length / 2;
    line.dataset.last = `${s.xy[s.xy.length - 2]},${s.xy[s.xy.length - 1]}`;
  }
  addHover(svg, series, { sx, x0, x1, plotW, plotH });
  return svg;
}

function addHover(svg, series, { sx, x0, x1, plotW, plotH }) {
  // a vertical rule and the values of every series at the nearest drawn step
  const rule = node("line", { y1: PAD.top, y2: PAD.top + plotH, stroke: "#888", "stroke-dasharray": "2,2",
    visibility: "hidden" }, svg);
  const label = node("text", { y: PAD.top + 12, "font-size": 11, fill: "#333", visibility: "hidden",
    class: "bvl-hover" }, svg);
  const area = node("rect", { x: PAD.left, y: PAD.top, width: plotW, height: plotH, fill: "transparent" }, svg);
  area.addEventListener("mousemove", (event) => {
    const box = svg.getBoundingClientRect();
    const x = x0 + (event.clientX - box.left - PAD.left) / plotW * (x1 - x0);
    const parts = [];
    let at = null;
    for (const s of series) {
      let best = -1;
      for (let i = 0; i < s.xy.length; i += 2) if (best < 0 || Math.abs(s.xy[i] - x) < Math.abs(s.xy[best] - x)) best = i;
      if (best >= 0) { at = at === null ? s.xy[best] : at; parts.push(`${s.name} ${fmt(s.xy[best + 1])}`); }
    }
    if (at === null) return;
    rule.setAttribute("x1", sx(at)); rule.setAttribute("x2", sx(at));
    label.textContent = `step ${fmt(at)}: ${parts.join(" · ")}`;
    const right = sx(at) > PAD.left + plotW / 2;
    label.setAttribute("x", right ? sx(at) - 4 : sx(at) + 4);
    label.setAttribute("text-anchor", right ? "end" : "start");
    rule.setAttribute("visibility", "visible"); label.setAttribute("visibility", "visible");
  });
  area.addEventListener("mouseleave", () => {
    rule.setAttribute("visibility", "hidden"); label.setAttribute("visibility", "hidden");
  });
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "bvl-loss-curves";
  root.style.cssText = "font: 12px system-ui, sans-serif; color: #222; background: #fff;";
  const title = document.createElement("div");
  title.className = "bvl-curves-title";
  title.style.cssText = "font-weight: bold; font-size: 14px; margin: 2px 0 4px;";
  const grid = document.createElement("div");
  grid.className = "bvl-curves-grid";
  grid.style.cssText = "display: grid; grid-template-columns: repeat(auto-fit, minmax(max(300px, 45%), 1fr)); gap: 8px;";
  root.append(title, grid);
  el.appendChild(root);

  let frame = 0;
  function draw() {
    frame = 0;
    title.textContent = model.get("title");
    const panels = model.get("panels") || [], total = model.get("total") || 0;
    while (grid.children.length > panels.length) grid.lastChild.remove();
    while (grid.children.length < panels.length) grid.appendChild(document.createElement("div"));
    panels.forEach((panel, i) => grid.children[i].replaceChildren(drawPanel(grid.children[i], panel, model, total)));
  }
  const schedule = () => { if (!frame) frame = requestAnimationFrame(draw); };
  // every series is a trait of its own (named by its metric key): a redraw sends only the ones that grew
  const keys = (model.get("panels") || []).flatMap((panel) => panel.series.map((s) => s.key));
  const names = ["change:total", "change:title", "change:panels", ...keys.map((key) => "change:" + key)];
  for (const name of names) model.on(name, schedule);
  let drawnWidth = 0;  // redraw when the width changes (a drawing changes only the height)
  const observer = new ResizeObserver((entries) => {
    const width = Math.round(entries[0].contentRect.width);
    if (width !== drawnWidth) { drawnWidth = width; schedule(); }
  });
  observer.observe(grid);
  draw();
  return () => {
    observer.disconnect();
    if (frame) cancelAnimationFrame(frame);
    for (const name of names) model.off(name, schedule);
  };
}

export default { render };
