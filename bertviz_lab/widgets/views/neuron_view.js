// The neuron view: inside one head, the query's vector q (top row), each key's vector k_j (one row per key), their
// elementwise product q ⊙ k_j, the score q·k_j/√d and the softmax weight. Vector cells are canvases with one pixel
// per value, scaled up by CSS (pixelated), coloured on a diverging scale (blue below zero, white at zero, red above);
// labels, bars and colour bars are SVG at the pixel positions the kernel computed (`geometry`, the same numbers as the
// exported SVG). Clicking a key's token makes it the query. Token text is only ever set with textContent.
const ZERO_CODE = 127, TOP_CODE = 254, LABEL_FONT = 11, NUMBER_ROW_H = 12;
const POSITIVE = "#d6604d", NEGATIVE = "#4393c3", WEIGHT = "#2171b5";

function floats(value) {
  const raw = bytes(value);
  return new Float32Array(raw.slice().buffer, 0, Math.floor(raw.byteLength / 4));
}

function code(value, top) {
  const step = Math.round((value / top) * ZERO_CODE);
  return Math.max(-ZERO_CODE, Math.min(ZERO_CODE, step)) + ZERO_CODE;
}

function render({ model, el }) {
  const outer = document.createElement("div");
  outer.className = "bvl-neuron-view";
  outer.style.cssText = "overflow: auto; max-width: 100%; max-height: 820px;";
  const root = document.createElement("div");
  root.style.cssText = "position: relative; font: 11px monospace;";
  outer.appendChild(root);
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.style.cssText = "position: absolute; left: 0; top: 0;";
  const canvases = {};
  root.appendChild(svg);
  for (const name of ["q", "k", "products"]) {
    const canvas = document.createElement("canvas");
    canvas.className = "bvl-neuron-cells bvl-" + name;
    canvas.dataset.block = name;
    canvas.style.cssText = "position: absolute; image-rendering: pixelated; cursor: crosshair;";
    root.appendChild(canvas);
    canvases[name] = canvas;
  }
  const tip = tooltip();
  root.appendChild(tip);
  el.appendChild(outer);

  let current = null, draws = 0;

  function paint(canvas, values, rows, cols, top, lut, box, x, y, rowH) {
    canvas.width = Math.max(cols, 1); canvas.height = Math.max(rows, 1);
    Object.assign(canvas.style, { left: x + "px", top: y + "px", width: cols * box.cell_w + "px",
      height: rows * rowH + "px", display: rows && cols ? "" : "none" });
    if (!rows || !cols) return;
    const ctx = canvas.getContext("2d"), image = ctx.createImageData(cols, rows);
    const pixels = new Uint32Array(image.data.buffer);
    for (let i = 0; i < rows * cols; i++) pixels[i] = lut[code(values[i], top)];
    ctx.putImageData(image, 0, 0);
  }

  function colorbar(x, y, h, palette, ticks, title) {
    verticalColorbar(svg, x, y, model.get("geometry").bar_w, h, palette, TOP_CODE, ticks, title, LABEL_FONT);
  }

  function draw() {
    const box = model.get("geometry") || {};
    svg.replaceChildren();
    tip.style.display = "none";
    const keys = model.get("key_tokens"), positions = model.get("key_positions");
    const n = keys.length, d = model.get("head_size");
    const q = floats(model.get("q")), k = floats(model.get("k")), products = floats(model.get("products"));
    const scores = floats(model.get("scores")), weights = floats(model.get("weights"));
    if (!box.row_h || q.length !== d || k.length !== n * d || products.length !== n * d || scores.length !== n) {
      current = null;
      for (const canvas of Object.values(canvases)) canvas.style.display = "none";
      root.style.width = "420px"; root.style.height = "40px";
      svg.setAttribute("width", 420); svg.setAttribute("height", 40);
      svgEl(svg, "text", { class: "bvl-title", x: 8, y: 24, "font-family": "sans-serif" },
        model.get("title") || "no query chosen");
      return;
    }
    root.style.width = box.total_w + "px"; root.style.height = box.total_h + "px";
    svg.setAttribute("width", box.total_w); svg.setAttribute("height", box.total_h);
    const palette = bytes(model.get("palette"));
    const lut = new Uint32Array(256), rgba = new Uint8Array(lut.buffer);
    for (let c = 0; c < 256; c++) {
      rgba[4 * c] = palette[3 * c]; rgba[4 * c + 1] = palette[3 * c + 1]; rgba[4 * c + 2] = palette[3 * c + 2];
      rgba[4 * c + 3] = 255;
    }
    const rowH = box.row_h, keysTop = box.keys_top, vectorTop = model.get("vector_top");
    svgEl(svg, "text", { class: "bvl-title", x: 8, y: 20, "font-size": 14, "font-family": "sans-serif",
      "font-weight": "bold" }, model.get("title"));
    if (model.get("note")) {
      svgEl(svg, "text", { class: "bvl-note", x: 8, y: 38, "font-size": 12, "font-family": "sans-serif",
        fill: "#555" }, model.get("note"));
    }
    const header = { class: "bvl-header", "font-family": "sans-serif", "font-size": 12, fill: "#333",
      y: box.header_y };
    svgEl(svg, "text", { ...header, x: box.k_x }, "q (top), k_j (one row per key) · dimensions →");
    svgEl(svg, "text", { ...header, x: box.p_x }, "q ⊙ k_j");
    svgEl(svg, "text", { ...header, x: box.s_x }, "q·k_j/√d");
    const weightTop = model.get("weight_top");
    svgEl(svg, "text", { ...header, x: box.w_x }, "softmax · bar ÷ " + Number(weightTop.toPrecision(3)));
    const queryLabel = `${model.get("query_position")}·${model.get("query_token")}`;
    const qText = svgEl(svg, "text", { class: "bvl-token bvl-query", x: box.k_x - 6, y: box.q_y + box.q_h - 3,
      "text-anchor": "end", "font-weight": "bold", fill: "#d62728" }, "q · " + shortToken(queryLabel));
    svgEl(qText, "title", {}, "query " + queryLabel);
    for (const x of [box.k_x, box.p_x]) {
      svgEl(svg, "rect", { x: x - 0.5, y: keysTop - 0.5, width: d * box.cell_w + 1, height: n * rowH + 1,
        fill: "none", stroke: "#888", "stroke-width": 0.5 });
    }
    paint(canvases.q, q, 1, d, vectorTop, lut, box, box.k_x, box.q_y, box.q_h);
    paint(canvases.k, k, n, d, vectorTop, lut, box, box.k_x, keysTop, rowH);
    paint(canvases.products, products, n, d, model.get("product_top"), lut, box, box.p_x, keysTop, rowH);

    // scores: bars from a centre line, red above zero and blue below; weights: bars from the left, 1 = full zone
    const zone = box.bar_zone, centre = box.s_x + zone / 2, scoreTop = model.get("score_top");
    svgEl(svg, "line", { x1: centre, x2: centre, y1: keysTop, y2: keysTop + n * rowH, stroke: "#bbb" });
    const bars = svgEl(svg, "g", { class: "bvl-scores", "shape-rendering": "crispEdges" });
    const barH = Math.max(rowH - (rowH > 3 ? 1 : 0), 1), numbers = rowH >= NUMBER_ROW_H;
    for (let r = 0; r < n; r++) {
      const y = keysTop + r * rowH, score = scores[r], weight = weights[r];
      const width = (Math.abs(score) / scoreTop) * zone / 2;
      const tipText = `key ${positions[r]}·${keys[r]}: q·k/√d = ${score.toPrecision(4)}, softmax = ` +
        weight.toPrecision(4);
      const s = svgEl(bars, "rect", { x: score < 0 ? centre - width : centre, y, width, height: barH,
        fill: score < 0 ? NEGATIVE : POSITIVE });
      svgEl(s, "title", {}, tipText);
      const w = svgEl(bars, "rect", { x: box.w_x, y, width: (weight / weightTop) * zone, height: barH, fill: WEIGHT });
      svgEl(w, "title", {}, tipText);
      if (numbers) {
        svgEl(bars, "text", { class: "bvl-score", x: box.s_x + zone + 4, y: y + rowH - 4 }, score.toFixed(2));
        svgEl(bars, "text", { class: "bvl-weight", x: box.w_x + zone + 4, y: y + rowH - 4 }, weight.toFixed(3));
      }
    }
    const queryRow = model.get("query_row");
    for (const [r, text] of model.get("key_ticks")) {
      const mine = r === queryRow;
      const label = svgEl(svg, "text", { class: "bvl-token bvl-key", x: box.k_x - 6, "text-anchor": "end",
        y: keysTop + (r + 0.5) * rowH + LABEL_FONT * 0.35, fill: mine ? "#d62728" : "#111",
        "font-weight": mine ? "bold" : "normal" }, text);
      svgEl(label, "title", {}, `key ${positions[r]}·${keys[r]} · click: make it the query`);
      label.style.cursor = "pointer";
      label.dataset.position = positions[r];
      label.addEventListener("click", () => model.send({ type: "query", position: positions[r] }));
    }
    if (queryRow >= 0 && queryRow < n && rowH >= 3) {
      svgEl(svg, "rect", { class: "bvl-query-row", x: box.k_x - 1, y: keysTop + queryRow * rowH - 0.5,
        width: box.w_x + zone + (numbers ? 44 : 0) - box.k_x + 2, height: rowH + 1, fill: "none", stroke: "#d62728",
        "stroke-width": 1, "pointer-events": "none" });
    }
    colorbar(box.bar_x, box.q_y, box.bar_h, palette, model.get("vector_ticks"), "q, k: value per dimension");
    colorbar(box.bar2_x, box.q_y, box.bar_h, palette, model.get("product_ticks"), "q ⊙ k: product per dimension");

    current = { keys, positions, q, k, products, d, n, rowH, queryLabel };
    draws += 1;
    Object.assign(outer.dataset, { rows: n, headSize: d, query: model.get("query_position"), draws,
      title: model.get("title") });
  }

  function showTip(event) {
    if (!current) return;
    const canvas = event.currentTarget, block = canvas.dataset.block;
    const rect = canvas.getBoundingClientRect();
    const rows = block === "q" ? 1 : current.n;
    const c = Math.floor(((event.clientX - rect.left) / rect.width) * current.d);
    const r = Math.floor(((event.clientY - rect.top) / rect.height) * rows);
    if (r < 0 || c < 0 || r >= rows || c >= current.d) { tip.style.display = "none"; return; }
    const who = block === "q" ? "query " + current.queryLabel : `key ${current.positions[r]}·${current.keys[r]}`;
    const value = block === "q" ? current.q[c] : block === "k" ? current.k[r * current.d + c] :
      current.products[r * current.d + c];
    const name = block === "products" ? "q ⊙ k" : block;
    tip.textContent = `${who}\ndimension ${c}\n${name} = ${value.toPrecision(4)}`;
    tip.style.display = "block";
    tip.style.left = (canvas.offsetLeft + ((c + 1) * rect.width) / current.d + 12) + "px";
    tip.style.top = (canvas.offsetTop + ((r + 1) * rect.height) / rows + 8) + "px";
  }
  for (const canvas of Object.values(canvases)) {
    canvas.addEventListener("mousemove", showTip);
    canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    queueMicrotask(() => { pending = false; draw(); });
  }
  const names = ["key_tokens", "key_positions", "key_ticks", "query_token", "query_position", "query_row",
    "head_size", "q", "k", "products", "scores", "weights", "vector_top", "product_top", "score_top", "weight_top", "palette",
    "vector_ticks", "product_ticks", "title", "note", "geometry"];
  for (const name of names) model.on("change:" + name, schedule);
  draw();
  return () => { for (const name of names) model.off("change:" + name, schedule); };
}

function shortToken(token) {
  return token.length <= 16 ? token : token.slice(0, 15) + "…";
}

export default { render };
