// The model view: every layer × head as a small map (rows: query tokens, columns: key tokens), all under one shared
// colour scale shown by a titled colour bar. Clicking a map sets `selected`; the panel opens it as the heatmap. In
// "ablate" click mode (or with shift held) a click switches the head off or on again in `ablated`; the panel runs the
// text again without those heads and sends a badge per head (how far its attention moved) and lines saying what the
// predictions did. Labels sit in their own grid column and row, sized to their text, so they are never clipped.
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
    const lines = document.createElement("div");
    lines.className = "bvl-ablation-lines";
    lines.style.cssText = "color: #333; margin: 0 0 6px;";
    for (const text of model.get("lines")) {
      const line = document.createElement("div");
      line.className = "bvl-ablation-line";
      line.textContent = text;
      lines.appendChild(line);
    }
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
    const ablated = model.get("ablated") || [], ablate = model.get("click_mode") === "ablate";
    const off = new Set(ablated.map(([l, h]) => l + ":" + h));
    const changesRaw = bytes(model.get("changes"));
    const changes = changesRaw.length === L * H * 4 ? new Float32Array(changesRaw.slice().buffer) : null;
    const badgeMin = model.get("badge_min");
    function toggle(l, h) {
      const key = l + ":" + h;
      const next = off.has(key) ? ablated.filter(([a, b]) => a + ":" + b !== key) : [...ablated, [l, h]];
      next.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      model.set("ablated", next);
      model.save_changes();
    }
    for (let l = 0; l < L; l++) {
      const name = document.createElement("span");
      name.className = "bvl-layer-label";
      name.textContent = "layer " + l;
      name.style.cssText = "white-space: nowrap; padding-right: 6px; text-align: right;";
      grid.appendChild(name);
      for (let h = 0; h < H; h++) {
        const cell = document.createElement("div");
        cell.className = "bvl-thumb-cell";
        cell.style.cssText = `position: relative; width: ${thumb}px; height: ${thumb}px;`;
        const canvas = document.createElement("canvas");
        canvas.width = s; canvas.height = s;
        canvas.className = "bvl-thumb";
        canvas.dataset.layer = l; canvas.dataset.head = h;
        const isOff = off.has(l + ":" + h);
        canvas.title = `layer ${l}, head ${h}${isOff ? " (switched off)" : ""}\n${hint}\n` + (ablate ?
          "click: switch this head " + (isOff ? "on again" : "off") :
          "click: open it as the heatmap · shift-click: switch it " + (isOff ? "on again" : "off"));
        const mine = selected[0] === l && selected[1] === h;
        canvas.style.cssText = `width: ${thumb}px; height: ${thumb}px; image-rendering: pixelated; cursor: ` +
          `${ablate ? "crosshair" : "pointer"}; box-sizing: border-box; border: 2px solid ` +
          `${isOff ? "#d62728" : mine && !ablate ? "#d62728" : "#ddd"};`;
        const ctx = canvas.getContext("2d"), image = ctx.createImageData(s, s);
        const pixels = new Uint32Array(image.data.buffer), base = (l * H + h) * s * s;
        for (let i = 0; i < s * s; i++) pixels[i] = lut[data[base + i]];
        ctx.putImageData(image, 0, 0);
        canvas.addEventListener("click", (event) => {
          if (ablate || event.shiftKey) toggle(l, h);
          else { model.set("selected", [l, h]); model.save_changes(); }
        });
        cell.appendChild(canvas);
        if (isOff) {
          const mark = document.createElement("span");
          mark.className = "bvl-ablated";
          mark.textContent = "off";
          mark.style.cssText = "position: absolute; inset: 0; display: flex; align-items: center; " +
            "justify-content: center; pointer-events: none; font: bold 12px system-ui, sans-serif; color: #d62728; " +
            "background: repeating-linear-gradient(45deg, rgba(255,255,255,0.55) 0 4px, rgba(214,39,40,0.25) 4px 6px);";
          cell.appendChild(mark);
        } else if (changes && changes[l * H + h] >= badgeMin) {
          const change = changes[l * H + h];
          const badge = document.createElement("span");
          badge.className = "bvl-badge";
          badge.textContent = change >= 0.995 ? "Δ1" : "Δ" + change.toFixed(2).replace(/^0/, "");
          badge.title = `attention moved by ${change.toFixed(3)} (half the L1 distance per query row, averaged)`;
          badge.style.cssText = "position: absolute; left: 2px; bottom: 2px; pointer-events: none; padding: 0 2px; " +
            "font: 10px system-ui, sans-serif; color: #111; background: rgba(255,255,255,0.85); border-radius: 2px;";
          cell.appendChild(badge);
        }
        grid.appendChild(cell);
      }
    }
    const height = Math.max(L * (thumb + box.gap) - box.gap, 160);
    row.append(grid, colorbar(height, palette, model.get("bar_ticks"), model.get("bar_title")));
    root.append(title, note, lines, row);
    root.dataset.layers = L; root.dataset.heads = H; root.dataset.size = s;
    root.dataset.ablated = ablated.map(([l, h]) => l + ":" + h).join(",");
    root.dataset.badges = root.querySelectorAll(".bvl-badge").length;
    root.dataset.clickMode = model.get("click_mode");
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    queueMicrotask(() => { pending = false; draw(); });
  }
  const names = ["thumbnails", "num_layers", "num_heads", "size", "selected", "scale", "palette", "bar_ticks",
    "bar_title", "title", "hint", "geometry", "zero_code", "click_mode", "ablated", "changes", "badge_min", "lines"];
  for (const name of names) model.on("change:" + name, schedule);
  draw();
  return () => { for (const name of names) model.off("change:" + name, schedule); };
}

export default { render };
