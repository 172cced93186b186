import { showFigure, tooltip, float16s, redrawScheduler, weightText, svgEl } from "./shared.js";
// The attention heatmap. The kernel draws the whole figure (figures/heatmap.py: one SVG document, the one the static
// copy and exports hold); this module shows it and reads weights out of it: hover, or the arrow keys once the cell
// area has focus, show a cell's query and key tokens and its weight from the float16 `values` the view holds, so
// reading works without the kernel. Token text is only ever set with textContent.
//
// The figure's cell area (class bvl-cells) says where the cells are: data-rows, data-cols, data-x, data-y (its
// top-left corner), data-cell (a cell's side), in the SVG's pixels.
// The view's element (div.bvl-heatmap-view) says what it shows, for tools and tests: data-title (the title of the
// drawing on screen), data-rows, data-cols, data-draws (drawings shown so far), data-draw-ms; while a cell is read,
// data-cell-row, data-cell-col and data-weight (the weight as the tooltip writes it).

const ARROWS = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };

// Where the cells of a figure are, from the data- attributes of its cell area (an element, or its dataset).
export function cellArea(dataset) {
  const area = {};
  for (const name of ["rows", "cols", "x", "y", "cell"]) area[name] = Number(dataset[name]);
  return area;
}

// The cell {row, col} under the point (x, y), in the SVG's pixels; null outside the cells.
export function cellAt(area, x, y) {
  const col = Math.floor((x - area.x) / area.cell), row = Math.floor((y - area.y) / area.cell);
  if (!(row >= 0 && col >= 0 && row < area.rows && col < area.cols)) return null;
  return { row, col };
}

// The cell an arrow key moves to from `cell` (the first cell when none is chosen yet); null for any other key.
export function moveCell(cell, key, rows, cols) {
  const step = ARROWS[key];
  if (!step || rows < 1 || cols < 1) return null;
  if (!cell) return { row: 0, col: 0 };
  return { row: Math.min(rows - 1, Math.max(0, cell.row + step[0])),
    col: Math.min(cols - 1, Math.max(0, cell.col + step[1])) };
}

// What the tooltip says about one cell: its query, its key (position·token) and its weight.
export function tipText(query, queryPosition, key, keyPosition, weight) {
  return `query ${queryPosition}·${query}\nkey ${keyPosition}·${key}\nweight ${weightText(weight)}`;
}

function render({ model, el }) {
  const outer = document.createElement("div"); // scrolls when the figure is wider than the notebook
  outer.className = "bvl-heatmap-view bvl-view";
  const stage = document.createElement("div"); // the tooltip's frame of reference
  stage.className = "bvl-heatmap-stage";
  const holder = document.createElement("div");
  const tip = tooltip();
  stage.append(holder, tip);
  outer.appendChild(stage);
  el.appendChild(outer);

  let current = null; // what reading a cell needs: the svg, its cell area, the weights and tokens
  let chosen = null; // the cell being read: {row, col}
  let draws = 0;

  function forget() {
    chosen = null;
    tip.style.display = "none";
    if (current) current.mark.setAttribute("visibility", "hidden");
    delete outer.dataset.cellRow;
    delete outer.dataset.cellCol;
    delete outer.dataset.weight;
  }

  // Shows the tooltip and the highlight of one cell.
  function read(cell) {
    if (!current || !cell) { forget(); return; }
    const { area, mark } = current;
    const { row, col } = cell;
    current.values = current.values || float16s(current.raw); // decoded on the first read, not on every redraw
    const weight = current.values[row * area.cols + col];
    chosen = cell;
    tip.textContent = tipText(current.rowTokens[row], current.rowPositions[row], current.colTokens[col],
      current.colPositions[col], weight);
    tip.style.display = "block";
    mark.setAttribute("transform", `translate(${area.x + col * area.cell},${area.y + row * area.cell})`);
    mark.setAttribute("visibility", "visible");
    Object.assign(outer.dataset, { cellRow: row, cellCol: col, weight: weightText(weight) });
    // beside the cell, inside the figure: right of it in the left half, left of it in the right half
    const frame = stage.getBoundingClientRect(), box = current.svg.getBoundingClientRect();
    const k = box.width / current.width || 1;
    const right = col < area.cols / 2;
    const x = box.left - frame.left + k * (area.x + (right ? (col + 1) * area.cell : col * area.cell));
    tip.style.left = (right ? x + 12 : x - 12 - tip.offsetWidth) + "px";
    tip.style.top = (box.top - frame.top + k * (area.y + row * area.cell) + 12) + "px";
  }

  function draw() {
    const started = performance.now();
    forget();
    const svg = showFigure(holder, model.get("svg"));
    const node = svg && svg.querySelector(".bvl-cells");
    const rowTokens = model.get("row_tokens"), colTokens = model.get("col_tokens");
    const raw = model.get("values");
    current = null;
    if (node) {
      const area = cellArea(node.dataset);
      const count = raw ? raw.byteLength / 2 : 0; // float16: two bytes a weight
      if (area.rows === rowTokens.length && area.cols === colTokens.length && count === area.rows * area.cols) {
        const mark = svgEl(svg, "g", { class: "bvl-heatmap-mark", visibility: "hidden" });
        svgEl(mark, "rect", { class: "bvl-heatmap-mark-halo", width: area.cell, height: area.cell });
        svgEl(mark, "rect", { class: "bvl-heatmap-mark-line", width: area.cell, height: area.cell });
        node.setAttribute("tabindex", "0");
        node.setAttribute("role", "img");
        node.setAttribute("aria-label", "attention weights: arrow keys read one cell after another");
        node.addEventListener("keydown", onKey);
        node.addEventListener("blur", forget);
        current = { svg, area, raw, values: null, mark, rowTokens, colTokens, width: Number(svg.getAttribute("width")),
          rowPositions: model.get("row_positions"), colPositions: model.get("col_positions") };
      }
    }
    draws += 1;
    Object.assign(outer.dataset, { title: model.get("title"), rows: rowTokens.length, cols: colTokens.length, draws,
      drawMs: (performance.now() - started).toFixed(1) });
  }

  function onMove(event) {
    if (!current) return;
    const box = current.svg.getBoundingClientRect();
    const k = current.width / box.width || 1;
    const cell = cellAt(current.area, (event.clientX - box.left) * k, (event.clientY - box.top) * k);
    if (!cell) { if (chosen) forget(); return; }
    if (!chosen || chosen.row !== cell.row || chosen.col !== cell.col) read(cell);
  }

  function onKey(event) {
    if (!current) return;
    if (event.key === "Escape") { forget(); return; }
    const cell = moveCell(chosen, event.key, current.area.rows, current.area.cols);
    if (!cell) return;
    event.preventDefault(); // the arrows move between cells, not the page
    read(cell);
  }

  stage.addEventListener("mousemove", onMove);
  stage.addEventListener("mouseleave", forget);
  const schedule = redrawScheduler(draw); // one redraw per batch of changes: a layer change sets every trait at once
  const names = ["svg", "values", "row_tokens", "col_tokens", "row_positions", "col_positions", "title"];
  for (const name of names) model.on("change:" + name, schedule);
  draw();
  return () => {
    for (const name of names) model.off("change:" + name, schedule);
  };
}

export default { render };
