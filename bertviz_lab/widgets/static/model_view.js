// The model view: every layer × head as a small map (rows: query tokens, columns: key tokens), all under one shared
// colour scale shown by a titled colour bar. Clicking a map sets `selected`; the panel opens it as the heatmap.
// Labels sit in their own grid column and row, sized to their text, so they are never clipped.
const TOP_CODE = 254;

function colorbar(height, palette, ticks, title) {
  const width = 110, x = 4, y = 6, w = 14, bands = 128;
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height + 12);
  const bar = svgEl(svg, "g", { class: "bvl-colorbar" });
  for (let band = 0; band < bands; band++) {
    const code = Math.round((band * TOP_CODE) / (bands - 1));
    const y0 = y + height * (1 - (band + 1) / bands), y1 = y + height * (1 - band / bands);
    svgEl(bar, "rect", { x, y: y0, width: w, height: y1 - y0 + 0.3, "shape-rendering": "crispEdges",
      fill: `rgb(${palette[3 * code]},${palette[3 * code + 1]},${palette[3 * code + 2]})` });
  }
  svgEl(bar, "rect", { x, y, width: w, height, fill: "none", stroke: "#888", "stroke-width": 0.5 });
  for (const [position, label] of ticks) {
    const ty = y + height * (1 - position);
    svgEl(bar, "line", { x1: x + w, y1: ty, x2: x + w + 4, y2: ty, stroke: "#555" });
    svgEl(bar, "text", { class: "bvl-colorbar-tick", x: x + w + 6, y: ty + 4, "font-size": 11,
      "font-family": "monospace" }, label);
  }
  svgEl(bar, "text", { class: "bvl-colorbar-title", transform: `translate(${width - 12},${y + height / 2}) rotate(90)`,
    "text-anchor": "middle", "font-size": 12, "font-family": "sans-serif" }, title);
  return svg;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "bvl-model-view";
  root.style.cssText = "font: 12px system-ui, sans-serif; overflow: auto; max-height: 760px;";
  el.appendChild(root);

  function draw() {
    root.replaceChildren();
    const L = model.get("num_layers"), H = model.get("num_heads"), s = model.get("size");
    const box = model.get("geometry"), thumb = box.thumb;
    const data = bytes(model.get("thumbnails")), palette = bytes(model.get("palette"));
    if (data.length !== L * H * s * s) return;
    const title = document.createElement("div");
    title.className = "bvl-title";
    title.style.cssText = "font-weight: bold; font-size: 14px; margin: 4px 0;";
    title.textContent = model.get("title");
    const hint = model.get("hint");
    const note = document.createElement("div"); // how to read every map: rows, columns, tokens, pooling
    note.className = "bvl-note";
    note.style.cssText = "color: #555; margin: 0 0 6px;";
    note.textContent = hint;
    const row = document.createElement("div");
    row.style.cssText = "display: flex; align-items: flex-start; gap: 12px;";
    const grid = document.createElement("div");
    grid.className = "bvl-model-grid";
    grid.style.cssText = `display: grid; gap: ${box.gap}px; align-items: center; ` +
      `grid-template-columns: max-content repeat(${H}, ${thumb}px);`;
    // the corner says how to read every map
    const corner = document.createElement("span");
    corner.className = "bvl-axes-hint";
    corner.textContent = "query ↓ key →";
    corner.title = hint;
    corner.style.cssText = "font-size: 11px; color: #555; white-space: nowrap; padding-right: 6px;";
    grid.appendChild(corner);
    for (let h = 0; h < H; h++) {
      const head = document.createElement("span");
      head.className = "bvl-head-label";
      head.textContent = "head " + h;
      head.style.cssText = "text-align: center; white-space: nowrap; font-size: 11px;";
      grid.appendChild(head);
    }
    const lut = new Uint32Array(256), rgba = new Uint8Array(lut.buffer);
    for (let code = 0; code < 256; code++) {
      rgba[4 * code] = palette[3 * code]; rgba[4 * code + 1] = palette[3 * code + 1];
      rgba[4 * code + 2] = palette[3 * code + 2]; rgba[4 * code + 3] = 255;
    }
    const selected = model.get("selected") || [-1, -1];
    for (let l = 0; l < L; l++) {
      const name = document.createElement("span");
      name.className = "bvl-layer-label";
      name.textContent = "layer " + l;
      name.style.cssText = "white-space: nowrap; padding-right: 6px; text-align: right;";
      grid.appendChild(name);
      for (let h = 0; h < H; h++) {
        const canvas = document.createElement("canvas");
        canvas.width = s; canvas.height = s;
        canvas.className = "bvl-thumb";
        canvas.dataset.layer = l; canvas.dataset.head = h;
        canvas.title = `layer ${l}, head ${h}\n${hint}\nclick to open it as the heatmap`;
        const mine = selected[0] === l && selected[1] === h;
        canvas.style.cssText = `width: ${thumb}px; height: ${thumb}px; image-rendering: pixelated; cursor: pointer;` +
          `box-sizing: border-box; border: 2px solid ${mine ? "#d62728" : "#ddd"};`;
        const ctx = canvas.getContext("2d"), image = ctx.createImageData(s, s);
        const pixels = new Uint32Array(image.data.buffer), base = (l * H + h) * s * s;
        for (let i = 0; i < s * s; i++) pixels[i] = lut[data[base + i]];
        ctx.putImageData(image, 0, 0);
        canvas.addEventListener("click", () => { model.set("selected", [l, h]); model.save_changes(); });
        grid.appendChild(canvas);
      }
    }
    const height = Math.max(L * (thumb + box.gap) - box.gap, 160);
    row.append(grid, colorbar(height, palette, model.get("bar_ticks"), model.get("bar_title")));
    root.append(title, note, row);
    root.dataset.layers = L; root.dataset.heads = H; root.dataset.size = s;
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    queueMicrotask(() => { pending = false; draw(); });
  }
  const names = ["thumbnails", "num_layers", "num_heads", "size", "selected", "scale", "palette", "bar_ticks",
    "bar_title", "title", "hint", "geometry"];
  for (const name of names) model.on("change:" + name, schedule);
  draw();
  return () => { for (const name of names) model.off("change:" + name, schedule); };
}

export default { render };
