// The saliency view: the text's tokens in reading order, each box filled by its score on a diverging scale (blue
// negative, red positive, white zero), with title, target, A / B labels of a pair and a colour bar. Positions and
// colours come from the kernel (`boxes`, `colors`, `geometry`: the same numbers as the exported SVG), the exact
// float32 scores from `scores`, so every new view (a reload, a second tab, Notebook 7) draws the same figure.
// While the kernel computes, the figure dims under a "computing…" badge. Token text is only ever set with
// textContent.
const MARGIN = 10, PAD_X = 5;

// The same text as saliency_view.score_text(): seven significant digits, as Python's "{:.7g}".
function scoreText(value) {
  if (value === 0) return "0";
  if (!Number.isFinite(value)) return String(value);
  const exponent = Math.floor(Math.log10(Math.abs(value)));
  if (exponent < -4 || exponent >= 7) {
    const [mantissa, power] = value.toExponential(6).split("e");
    const trimmed = mantissa.includes(".") ? mantissa.replace(/0+$/, "").replace(/\.$/, "") : mantissa;
    const sign = power[0] === "-" ? "-" : "+";
    const digits = power.replace(/^[+-]/, "").padStart(2, "0");
    return `${trimmed}e${sign}${digits}`;
  }
  const fixed = value.toFixed(Math.max(0, 6 - exponent));
  return fixed.includes(".") ? fixed.replace(/0+$/, "").replace(/\.$/, "") : fixed;
}

function floats(value) {
  const raw = bytes(value);
  return new Float32Array(raw.slice().buffer, 0, Math.floor(raw.byteLength / 4));
}

function render({ model, el }) {
  const outer = document.createElement("div"); // scrolls when the figure is wider than the notebook
  outer.className = "bvl-saliency";
  outer.style.cssText = "overflow: auto; max-width: 100%;";
  const root = document.createElement("div");
  root.className = "bvl-saliency-figure";
  root.style.cssText = "position: relative; font: 13px monospace;";
  outer.appendChild(root);
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.style.cssText = "display: block; transition: opacity 0.15s;";
  const badge = document.createElement("div");
  badge.className = "bvl-saliency-status";
  badge.style.cssText = "position: absolute; right: 8px; top: 6px; display: none; padding: 2px 10px;" +
    "border-radius: 10px; background: #fff6ea; border: 1px solid #ff7f0e; color: #5a3a00;" +
    "font: 12px system-ui, sans-serif;";
  const tip = tooltip();
  root.append(svg, badge, tip);
  el.appendChild(outer);

  let draws = 0;

  function header() {
    const rows = [["bvl-title", model.get("title"), 14, "bold", "#111"],
      ["bvl-subtitle", model.get("subtitle"), 12, "normal", "#222"],
      ["bvl-note", model.get("note"), 12, "normal", "#555"]];
    let y = 8;
    for (const [css, text, size, weight, fill] of rows) {
      if (!text) continue;
      y += 20;
      svgEl(svg, "text", { class: css, x: MARGIN, y: y - 6, "font-size": size, "font-family": "sans-serif",
        "font-weight": weight, fill }, text);
    }
    return y;
  }

  function colorbar(box) {
    const palette = bytes(model.get("palette"));
    const codes = palette.length / 3;
    const bar = svgEl(svg, "g", { class: "bvl-colorbar" });
    const { bar_x: x, bar_y: y, bar_w: w, bar_h: h } = box;
    svgEl(bar, "text", { class: "bvl-colorbar-title", x: MARGIN, y: box.bar_title_y, "font-size": 12,
      "font-family": "sans-serif", fill: "#333" }, model.get("bar_title"));
    const bands = 64;
    for (let band = 0; band < bands; band++) {
      const code = Math.round((band * (codes - 1)) / (bands - 1));
      svgEl(bar, "rect", { x: x + (w * band) / bands, y, width: w / bands + 0.3, height: h,
        "shape-rendering": "crispEdges",
        fill: `rgb(${palette[3 * code]},${palette[3 * code + 1]},${palette[3 * code + 2]})` });
    }
    svgEl(bar, "rect", { x, y, width: w, height: h, fill: "none", stroke: "#888", "stroke-width": 0.5 });
    for (const [position, label] of model.get("bar_ticks")) {
      const tx = x + w * position;
      svgEl(bar, "line", { x1: tx, y1: y + h, x2: tx, y2: y + h + 4, stroke: "#555" });
      svgEl(bar, "text", { class: "bvl-colorbar-tick", x: tx, y: y + h + 16, "text-anchor": "middle",
        "font-size": 11 }, label);
    }
  }

  function draw() {
    const box = model.get("geometry") || {};
    const status = model.get("status");
    svg.replaceChildren();
    tip.style.display = "none";
    const width = box.total_w || 320, height = box.total_h || 60;
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    root.style.width = width + "px";
    root.style.minHeight = height + "px";
    svgEl(svg, "rect", { width: "100%", height: "100%", fill: "#fff" });
    const bottom = header();
    badge.textContent = model.get("message") || "computing…";
    badge.style.display = status === "computing" ? "block" : "none";
    svg.style.opacity = status === "computing" ? "0.45" : "1";
    outer.dataset.status = status;
    if (status === "error") {
      svgEl(svg, "text", { class: "bvl-error", x: MARGIN, y: bottom + 20, "font-size": 12,
        "font-family": "sans-serif", fill: "#d62728" }, model.get("message"));
      outer.dataset.tokens = 0;
      return;
    }
    const tokens = model.get("tokens"), labels = model.get("labels"), positions = model.get("positions");
    const colors = model.get("colors"), ink = model.get("ink"), special = model.get("special");
    const boxes = model.get("boxes"), scores = floats(model.get("scores"));
    const group = svgEl(svg, "g", { class: "bvl-tokens" });
    const h = box.box_h || 22, font = box.font || 13;
    boxes.forEach(([x, y, w], i) => {
      const token = svgEl(group, "g", { class: "bvl-token", "data-position": positions[i] });
      svgEl(token, "rect", { x, y, width: w, height: h, rx: 3, fill: colors[i], stroke: "#9aa0a6",
        "stroke-width": 0.6, ...(special[i] ? { "stroke-dasharray": "3,2" } : {}) });
      svgEl(token, "text", { x: x + PAD_X, y: y + h / 2 + font * 0.35, fill: ink[i] }, labels[i]);
      token.addEventListener("mouseenter", () => {
        tip.textContent = `${positions[i]} · ${tokens[i]}\nscore ${scoreText(scores[i])}`;
        tip.style.display = "block";
        const right = x + w + 8 + tip.offsetWidth < width;
        tip.style.left = (right ? x + w + 8 : Math.max(0, x - 8 - tip.offsetWidth)) + "px";
        tip.style.top = (y + h + 4) + "px";
        outer.dataset.hovered = i;
      });
      token.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    });
    for (const [y, text] of model.get("gutter")) {
      svgEl(svg, "text", { class: "bvl-segment", x: MARGIN, y: y + h / 2 + font * 0.35, "font-family": "sans-serif",
        "font-weight": "bold", fill: "#666" }, text);
    }
    if (box.bar_w) colorbar(box);
    draws += 1;
    // for tests and tools: what was drawn, and the score a token shows on hover
    outer.bvlScoreText = (i) => scoreText(scores[i]);
    Object.assign(outer.dataset, { tokens: tokens.length, draws, title: model.get("title"),
      subtitle: model.get("subtitle") });
  }

  // one redraw per batch of changes (a new figure sets every trait in one message)
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    queueMicrotask(() => { pending = false; draw(); });
  }
  const names = ["tokens", "labels", "positions", "special", "scores", "colors", "ink", "boxes", "gutter", "limit",
    "palette", "bar_ticks", "bar_title", "title", "subtitle", "note", "geometry", "status", "message"];
  for (const name of names) model.on("change:" + name, schedule);
  draw();
  return () => {
    for (const name of names) model.off("change:" + name, schedule);
  };
}

export default { render };
