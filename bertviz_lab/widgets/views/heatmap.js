// The attention heatmap. Cells: a canvas with one pixel per weight, scaled up by CSS (pixelated), filled with
// putImageData from the 8-bit codes; title, axes, token labels and colour bar: SVG, at the pixel positions the kernel
// computed (`geometry`, the same numbers as the exported SVG). Everything comes from the synced state, so every new
// view (a reload, a second tab, Notebook 7) draws the same figure. Token text is only ever set with textContent.
const TOP_CODE = 254; // code of the colour range's top; 255 = above it (a clipped [CLS]/[SEP] weight)
const LABEL_FONT = 11;

// The same fingerprint as attention_data.digest(): sum of code × (i mod 65521 + 1), mod 2^32 (exact in doubles).
function digest(codes) {
  let sum = 0;
  for (let i = 0; i < codes.length; i++) sum += codes[i] * ((i % 65521) + 1);
  return (sum % 4294967296).toString(16).padStart(8, "0");
}

// Turns a cell's code back into its weight (see attention_data.HeatmapCodes).
function makeDecoder(model, cols, codes) {
  const mode = model.get("mode"), scale = model.get("scale");
  const rowScales = typed(model.get("row_scales"), Float32Array);
  const [floor, top] = model.get("log_range") || [0, 0];
  const overIndex = typed(model.get("overflow_index"), Uint32Array);
  const overValues = typed(model.get("overflow_values"), Float32Array);
  const over = new Map();
  overIndex.forEach((at, i) => over.set(at, overValues[i]));
  return (r, c) => {
    const at = r * cols + c;
    if (over.has(at)) return { value: over.get(at), exact: true };
    const code = codes[at];
    if (mode === "row") return { value: code * rowScales[r], step: rowScales[r] };
    if (mode === "log") {
      const value = floor * Math.pow(top / floor, Math.min(code, TOP_CODE) / TOP_CODE);
      return { value, below: code === 0 };
    }
    return { value: code * scale, step: scale };
  };
}

function render({ model, el }) {
  const outer = document.createElement("div"); // scrolls when the figure is wider than the notebook
  outer.className = "bvl-heatmap";
  outer.style.cssText = "overflow: auto; max-width: 100%;";
  const root = document.createElement("div");
  root.className = "bvl-heatmap-figure";
  root.style.cssText = "position: relative; font: 11px monospace;";
  outer.appendChild(root);
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.style.cssText = "position: absolute; left: 0; top: 0;";
  const canvas = document.createElement("canvas");
  canvas.className = "bvl-heatmap-cells";
  canvas.style.cssText = "position: absolute; image-rendering: pixelated; cursor: crosshair;";
  const tip = tooltip();
  root.append(svg, canvas, tip);
  el.appendChild(outer);

  let current = null; // what hover needs: decoder, tokens, cell size
  let draws = 0;

  function drawLabels(box, rows, cols) {
    const { left, top, cell } = box;
    const labels = svgEl(svg, "g", { "font-family": "monospace", "font-size": LABEL_FONT });
    for (const [r, text] of model.get("row_ticks")) {
      svgEl(labels, "text", { class: "bvl-token bvl-query", x: left - 4, y: top + (r + 0.5) * cell + LABEL_FONT * 0.35,
        "text-anchor": "end" }, text);
    }
    for (const [c, text] of model.get("col_ticks")) {
      const x = left + (c + 0.5) * cell + LABEL_FONT * 0.35;
      svgEl(labels, "text", { class: "bvl-token bvl-key", "text-anchor": "end",
        transform: `translate(${x},${top + rows * cell + 4}) rotate(-90)` }, text);
    }
    const axis = { "font-family": "sans-serif", "font-size": 12, fill: "#333", "text-anchor": "middle",
      class: "bvl-axis-title" };
    svgEl(svg, "text", { ...axis, transform: `translate(12,${top + (rows * cell) / 2}) rotate(-90)` }, "query");
    svgEl(svg, "text", { ...axis, x: left + (cols * cell) / 2, y: top + rows * cell + box.col_label_h + 20 }, "key");
  }

  // Vertical bar, code 0 at the bottom, in stacked bands (as the exported SVG); ticks are real weights.
  function drawColorbar(box, palette) {
    verticalColorbar(svg, box.bar_x, box.top, box.bar_w, box.bar_h, palette, TOP_CODE, model.get("bar_ticks"),
      model.get("bar_title"), LABEL_FONT);
  }

  function draw() {
    const started = performance.now();
    const box = model.get("geometry") || {};
    const rowTokens = model.get("row_tokens"), colTokens = model.get("col_tokens");
    const rows = rowTokens.length, cols = colTokens.length;
    const codes = bytes(model.get("codes"));
    const palette = bytes(model.get("palette"));
    svg.replaceChildren();
    tip.style.display = "none";
    if (!box.cell || codes.length !== rows * cols) { current = null; return; }
    root.style.width = box.total_w + "px";
    root.style.height = box.total_h + "px";
    svg.setAttribute("width", box.total_w);
    svg.setAttribute("height", box.total_h);
    svgEl(svg, "text", { class: "bvl-title", x: 8, y: 20, "font-size": 14, "font-family": "sans-serif",
      "font-weight": "bold" }, model.get("title"));
    if (model.get("note")) {
      svgEl(svg, "text", { class: "bvl-note", x: 8, y: 38, "font-size": 12, "font-family": "sans-serif",
        fill: "#555" }, model.get("note"));
    }
    svgEl(svg, "rect", { x: box.left - 0.5, y: box.top - 0.5, width: cols * box.cell + 1, height: rows * box.cell + 1,
      fill: "none", stroke: "#888", "stroke-width": 0.5 });
    drawLabels(box, rows, cols);
    drawColorbar(box, palette);

    // cells: a 32-bit colour per code, then one pass over the codes
    const lut = new Uint32Array(256), rgba = new Uint8Array(lut.buffer);
    for (let code = 0; code < 256; code++) {
      rgba[4 * code] = palette[3 * code]; rgba[4 * code + 1] = palette[3 * code + 1];
      rgba[4 * code + 2] = palette[3 * code + 2]; rgba[4 * code + 3] = 255;
    }
    canvas.width = cols; canvas.height = rows;
    Object.assign(canvas.style, { left: box.left + "px", top: box.top + "px",
      width: cols * box.cell + "px", height: rows * box.cell + "px" });
    const ctx = canvas.getContext("2d");
    const image = ctx.createImageData(cols, rows);
    const pixels = new Uint32Array(image.data.buffer);
    for (let i = 0; i < codes.length; i++) pixels[i] = lut[codes[i]];
    ctx.putImageData(image, 0, 0);

    current = { decode: makeDecoder(model, cols, codes), rowTokens, colTokens, cell: box.cell, rows, cols,
      rowPositions: model.get("row_positions"), colPositions: model.get("col_positions") };
    draws += 1;
    // for tests and tools: the weight a cell shows, read back from the codes as hover does
    outer.bvlWeightAt = (r, c) => current.decode(r, c).value;
    Object.assign(outer.dataset, { rows, cols, digest: digest(codes), draws, title: model.get("title"),
      drawMs: (performance.now() - started).toFixed(1) });
  }

  // hover: the weight read back from the codes at once, the exact one from the kernel when it answers
  let asked = 0, hovered = null;
  function showTip(event) {
    if (!current) return;
    const rect = canvas.getBoundingClientRect();
    const c = Math.floor(((event.clientX - rect.left) / rect.width) * current.cols);
    const r = Math.floor(((event.clientY - rect.top) / rect.height) * current.rows);
    if (r < 0 || c < 0 || r >= current.rows || c >= current.cols) { tip.style.display = "none"; return; }
    const cellChanged = !hovered || hovered.r !== r || hovered.c !== c;
    if (cellChanged) {
      const read = current.decode(r, c);
      const approx = read.exact ? weightText(read.value) : read.below ? "< " + weightText(read.value) :
        "≈ " + weightText(read.value);
      hovered = { r, c, seq: ++asked, weight: approx };
      model.send({ type: "weight", row: r, col: c, seq: asked });
    }
    tip.textContent = `query ${current.rowPositions[r]}·${current.rowTokens[r]}\n` +
      `key ${current.colPositions[c]}·${current.colTokens[c]}\nweight ${hovered.weight}`;
    tip.style.display = "block";
    const right = c < current.cols / 2; // keep the tip inside the figure: right of the cell, or left of it
    tip.style.left = (right ? canvas.offsetLeft + (c + 1) * current.cell + 12 :
      canvas.offsetLeft + c * current.cell - 12 - tip.offsetWidth) + "px";
    tip.style.top = (canvas.offsetTop + r * current.cell + 12) + "px";
  }
  function onMessage(message) {
    if (!message || message.type !== "weight" || !hovered || message.seq !== hovered.seq) return;
    hovered.weight = weightText(message.value);
    const lines = tip.textContent.split("\n");
    lines[2] = "weight " + hovered.weight;
    tip.textContent = lines.join("\n");
  }
  canvas.addEventListener("mousemove", showTip);
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; hovered = null; });
  model.on("msg:custom", onMessage);

  // one redraw per batch of changes (a layer change sets several traits in one message)
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    queueMicrotask(() => { pending = false; draw(); });
  }
  const names = ["codes", "mode", "scale", "row_scales", "log_range", "overflow_index", "overflow_values", "palette",
    "row_tokens", "col_tokens", "row_positions", "col_positions", "row_ticks", "col_ticks", "bar_ticks",
    "bar_title", "title", "note", "geometry"];
  for (const name of names) model.on("change:" + name, schedule);
  draw();
  return () => {
    for (const name of names) model.off("change:" + name, schedule);
    model.off("msg:custom", onMessage);
  };
}

export default { render };
