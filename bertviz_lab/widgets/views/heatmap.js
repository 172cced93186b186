import { showFigure, tooltip, float16s, redrawScheduler, weightText, svgEl, keepKeysInPanel } from "./shared.js";
// The attention heatmap. The kernel draws the whole figure (figures/heatmap.py: one SVG document, the one the static
// copy and exports hold); this module shows it and reads weights out of it: hover, or the arrow keys once the cell
// area has focus, show a cell's query and key tokens and its weight from the float16 `values` the view holds (every
// weight of the matrix, zoomed or not), so reading works without the kernel. Token text is only ever set with
// textContent.
//
// Long texts are read through a window. The zoom bar above the figure (buttons, and the query and key ranges as token
// positions), the mouse wheel over the cells (around the cell under the pointer) and the keys + and - (around the
// cell being read) write the window to the kernel's `window` trait ([query_start, query_end, key_start, key_end] as
// positions, ends excluded; [] for all), and the kernel draws it; Escape resets it. Focus reads the window's first
// cell; the arrow keys move the cell being read over the whole matrix, and the window follows it. Enter or Space (or a click) selects the cell: the kernel's
// `selected` trait ([query_position, key_position]) marks it in the drawing.
//
// The figure's cell area (class bvl-cells) says where the cells are: data-rows, data-cols (the cells drawn), data-row0,
// data-col0 (the first one's row and column in the matrix), data-x, data-y (its top-left corner), data-cell-w and
// data-cell-h (a cell's sides; a window sizes them apart), in the SVG's pixels, and data-top (the top of a single
// colour scale: a weight above it is clipped).
// The view's element (div.bvl-heatmap-view) says what it shows, for tools and tests: data-title (the title of the
// drawing on screen, window included), data-rows, data-cols (the whole matrix), data-window (the window drawn, as
// positions "qs,qe,ks,ke", or ""), data-draws (drawings shown so far), data-draw-ms; while a cell is read,
// data-cell-row, data-cell-col (in the matrix) and data-weight (the weight as the tooltip writes it).

const ARROWS = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
export const MIN_WINDOW = 8; // tokens a side: zooming in stops there

// Where the cells of a figure are, from the data- attributes of its cell area (an element, or its dataset).
export function cellArea(dataset) {
  const area = {};
  for (const name of ["rows", "cols", "x", "y"]) area[name] = Number(dataset[name]);
  area.cellW = Number(dataset.cellW || dataset.cell);
  area.cellH = Number(dataset.cellH || dataset.cell);
  area.row0 = Number(dataset.row0 || 0);
  area.col0 = Number(dataset.col0 || 0);
  area.top = dataset.top === undefined ? null : Number(dataset.top);
  return area;
}

// The cell {row, col} under the point (x, y), in the SVG's pixels, as row and column of the matrix; null outside
// the cells.
export function cellAt(area, x, y) {
  const col = Math.floor((x - area.x) / area.cellW), row = Math.floor((y - area.y) / area.cellH);
  if (!(row >= 0 && col >= 0 && row < area.rows && col < area.cols)) return null;
  return { row: row + (area.row0 || 0), col: col + (area.col0 || 0) };
}

// The cell an arrow key moves to from `cell` (the first cell when none is chosen yet); null for any other key.
export function moveCell(cell, key, rows, cols) {
  const step = ARROWS[key];
  if (!step || rows < 1 || cols < 1) return null;
  if (!cell) return { row: 0, col: 0 };
  return { row: Math.min(rows - 1, Math.max(0, cell.row + step[0])),
    col: Math.min(cols - 1, Math.max(0, cell.col + step[1])) };
}

// What the tooltip says about one cell: its query, its key (position·token) and its weight, and whether the weight
// lies beyond the colour scale (`top`: the scale's top weight, null where each row has its own).
export function tipText(query, queryPosition, key, keyPosition, weight, top = null) {
  const clipped = top !== null && weight > top ? ` (beyond the colour scale's ${weightText(top)}: clipped)` : "";
  return `query ${queryPosition}·${query}\nkey ${keyPosition}·${key}\nweight ${weightText(weight)}${clipped}`;
}

// The window {r0, r1, c0, c1} (matrix indices, ends excluded) that a window of token positions [qs, qe, ks, ke]
// shows, given the ascending positions of the rows and columns; the whole matrix for [] or a window holding none.
export function indexWindow(positions, rowPositions, colPositions) {
  const whole = { r0: 0, r1: rowPositions.length, c0: 0, c1: colPositions.length };
  if (!positions || positions.length !== 4) return whole;
  const span = (at, start, end) => {
    let first = at.findIndex((p) => p >= start);
    if (first < 0) first = at.length;
    let last = at.findIndex((p) => p >= end);
    if (last < 0) last = at.length;
    return last > first ? [first, last] : null;
  };
  const rows = span(rowPositions, positions[0], positions[1]), cols = span(colPositions, positions[2], positions[3]);
  if (!rows || !cols) return whole;
  return { r0: rows[0], r1: rows[1], c0: cols[0], c1: cols[1] };
}

// A window of matrix indices as the `window` trait writes it: token positions [qs, qe, ks, ke], ends excluded; []
// when it is the whole matrix.
export function positionWindow(win, rowPositions, colPositions) {
  if (win.r0 === 0 && win.c0 === 0 && win.r1 === rowPositions.length && win.c1 === colPositions.length) return [];
  return [rowPositions[win.r0], rowPositions[win.r1 - 1] + 1, colPositions[win.c0], colPositions[win.c1 - 1] + 1];
}

// One side of a window of `size` around `centre` among `count`, kept inside: [start, end).
function around(centre, size, count) {
  const start = Math.max(0, Math.min(count - size, Math.round(centre - size / 2)));
  return [start, start + size];
}

// The window after zooming in (`direction` 1) or out (-1) around the cell {row, col}: each side halves to the power
// of two below it (never under MIN_WINDOW tokens) or doubles (up to the whole matrix).
export function zoomWindow(win, direction, centre, rows, cols) {
  const next = (size, count) => {
    if (direction > 0) return Math.min(size, Math.max(MIN_WINDOW, 2 ** Math.ceil(Math.log2(size) - 1)));
    return Math.min(count, 2 ** (Math.floor(Math.log2(size)) + 1));
  };
  const [r0, r1] = around(centre.row, next(win.r1 - win.r0, rows), rows);
  const [c0, c1] = around(centre.col, next(win.c1 - win.c0, cols), cols);
  return { r0, r1, c0, c1 };
}

// The window moved (its size kept) as little as it takes to show the cell {row, col}.
export function followCell(win, cell) {
  const shift = (start, end, at) => (at < start ? at - start : at >= end ? at - end + 1 : 0);
  const dr = shift(win.r0, win.r1, cell.row), dc = shift(win.c0, win.c1, cell.col);
  return { r0: win.r0 + dr, r1: win.r1 + dr, c0: win.c0 + dc, c1: win.c1 + dc };
}

// The window that shows the positions a person typed (ends included) on one side, the other side kept.
export function typedWindow(win, side, from, to, rowPositions, colPositions) {
  const low = Math.min(from, to), high = Math.max(from, to);
  const positions = side === "query" ? rowPositions : colPositions;
  const found = indexWindow([low, high + 1, low, high + 1], positions, positions);
  if (found.r1 - found.r0 === positions.length && !positions.some((p) => p >= low && p <= high)) return win;
  return side === "query" ? { ...win, r0: found.r0, r1: found.r1 } : { ...win, c0: found.r0, c1: found.r1 };
}

function button(label, text, title) {
  const node = document.createElement("button");
  node.type = "button";
  node.className = "bvl-zoom-button";
  node.textContent = text;
  node.title = title;
  node.setAttribute("aria-label", label);
  return node;
}

function rangeInput(label) {
  const node = document.createElement("input");
  node.type = "number";
  node.min = "0";
  node.step = "1";
  node.className = "bvl-range-input";
  node.setAttribute("aria-label", label);
  return node;
}

function render({ model, el }) {
  keepKeysInPanel(el);
  const outer = document.createElement("div"); // scrolls when the figure is wider than the notebook
  outer.className = "bvl-heatmap-view bvl-view";
  const bar = document.createElement("div"); // the zoom bar
  bar.className = "bvl-zoom-bar";
  bar.setAttribute("role", "toolbar");
  bar.setAttribute("aria-label", "heatmap zoom");
  const zoomIn = button("zoom in", "+", "zoom in (+, or the mouse wheel over the cells)");
  const zoomOut = button("zoom out", "−", "zoom out (-)");
  const reset = button("show all tokens", "all", "show all tokens (Escape)");
  const inputs = {};
  const ranges = [];
  for (const side of ["query", "key"]) {
    const group = document.createElement("span");
    group.className = "bvl-range";
    const name = document.createElement("span");
    name.textContent = side === "query" ? "queries" : "keys";
    inputs[side] = [rangeInput(`first ${side} position shown`), rangeInput(`last ${side} position shown`)];
    const dash = document.createElement("span");
    dash.textContent = "–";
    group.append(name, inputs[side][0], dash, inputs[side][1]);
    ranges.push(group);
  }
  bar.append(zoomIn, zoomOut, reset, ...ranges);
  const stage = document.createElement("div"); // the tooltip's frame of reference
  stage.className = "bvl-heatmap-stage";
  const holder = document.createElement("div");
  const tip = tooltip();
  tip.setAttribute("aria-live", "polite"); // the keyboard's cell is read out as it moves
  stage.append(holder, tip);
  outer.append(bar, stage);
  el.appendChild(outer);

  let current = null; // what reading a cell needs: the svg, its cell area, the weights and tokens
  let chosen = null; // the cell being read, in the matrix: {row, col}
  let keyboard = false; // the cell area had the focus when it was redrawn: it gets it back
  let draws = 0;
  let sent = null; // the window last written to the kernel, until the kernel draws it

  const rowPositions = () => model.get("row_positions"), colPositions = () => model.get("col_positions");
  const size = () => ({ rows: model.get("row_tokens").length, cols: model.get("col_tokens").length });
  // the window being shown, or the one asked for and not yet drawn (so quick wheel turns add up)
  const shownWindow = () => sent || indexWindow(model.get("window"), rowPositions(), colPositions());

  function ask(win) {
    const positions = positionWindow(win, rowPositions(), colPositions());
    sent = win;
    model.set("window", positions);
    model.save_changes();
  }

  function forget() {
    chosen = null;
    tip.style.display = "none";
    if (current) current.mark.setAttribute("visibility", "hidden");
    delete outer.dataset.cellRow;
    delete outer.dataset.cellCol;
    delete outer.dataset.weight;
  }

  // Shows the tooltip and the highlight of one cell of the matrix (drawn in the window on screen).
  function read(cell) {
    if (!current || !cell) { forget(); return; }
    const { area, mark } = current;
    const { row, col } = cell;
    const r = row - area.row0, c = col - area.col0;
    if (r < 0 || c < 0 || r >= area.rows || c >= area.cols) { // not drawn yet: read once the window shows it
      forget();
      chosen = cell;
      return;
    }
    current.values = current.values || float16s(current.raw); // decoded on the first read, not on every redraw
    const weight = current.values[row * current.cols + col];
    chosen = cell;
    tip.textContent = tipText(current.rowTokens[row], current.rowPositions[row], current.colTokens[col],
      current.colPositions[col], weight, area.top);
    tip.style.display = "block";
    mark.setAttribute("transform", `translate(${area.x + c * area.cellW},${area.y + r * area.cellH})`);
    mark.setAttribute("visibility", "visible");
    Object.assign(outer.dataset, { cellRow: row, cellCol: col, weight: weightText(weight) });
    // beside the cell, inside the figure: right of it in the left half, left of it in the right half
    const frame = stage.getBoundingClientRect(), box = current.svg.getBoundingClientRect();
    const k = box.width / current.width || 1;
    const right = c < area.cols / 2;
    const x = box.left - frame.left + k * (area.x + (right ? (c + 1) * area.cellW : c * area.cellW));
    tip.style.left = (right ? x + 12 : x - 12 - tip.offsetWidth) + "px";
    tip.style.top = (box.top - frame.top + k * (area.y + r * area.cellH) + 12) + "px";
  }

  function showRanges() {
    const win = indexWindow(model.get("window"), rowPositions(), colPositions());
    const rows = rowPositions(), cols = colPositions();
    if (!rows.length || !cols.length) return;
    const values = { query: [rows[win.r0], rows[win.r1 - 1]], key: [cols[win.c0], cols[win.c1 - 1]] };
    for (const side of ["query", "key"]) {
      inputs[side].forEach((input, end) => {
        if (input !== document.activeElement) input.value = values[side][end]; // not under a person's typing
      });
    }
    const whole = win.r0 === 0 && win.c0 === 0 && win.r1 === rows.length && win.c1 === cols.length;
    reset.disabled = zoomOut.disabled = whole;
    zoomIn.disabled = win.r1 - win.r0 <= MIN_WINDOW && win.c1 - win.c0 <= MIN_WINDOW;
  }

  function draw() {
    const started = performance.now();
    const again = chosen;
    keyboard = keyboard || Boolean(current && current.node && current.node === document.activeElement);
    forget();
    const svg = showFigure(holder, model.get("svg"));
    const node = svg && svg.querySelector(".bvl-cells");
    const rowTokens = model.get("row_tokens"), colTokens = model.get("col_tokens");
    const raw = model.get("values");
    current = null;
    sent = null;
    if (node) {
      const area = cellArea(node.dataset);
      const count = raw ? raw.byteLength / 2 : 0; // float16: two bytes a weight
      if (area.row0 + area.rows <= rowTokens.length && area.col0 + area.cols <= colTokens.length &&
          count === rowTokens.length * colTokens.length) {
        const mark = svgEl(svg, "g", { class: "bvl-heatmap-mark", visibility: "hidden" });
        svgEl(mark, "rect", { class: "bvl-heatmap-mark-halo", width: area.cellW, height: area.cellH });
        svgEl(mark, "rect", { class: "bvl-heatmap-mark-line", width: area.cellW, height: area.cellH });
        node.setAttribute("tabindex", "0");
        node.setAttribute("role", "img");
        node.setAttribute("aria-label", "attention weights: the arrow keys read one cell after another, + and - " +
          "zoom, Enter selects the cell, Escape shows all tokens");
        node.addEventListener("keydown", onKey);
        node.addEventListener("focus", () => { if (!chosen) read({ row: area.row0, col: area.col0 }); });
        node.addEventListener("blur", () => { if (!keyboard) forget(); });
        current = { svg, area, raw, values: null, mark, node, rowTokens, colTokens, cols: colTokens.length,
          width: Number(svg.getAttribute("width")), rowPositions: rowPositions(), colPositions: colPositions() };
        if (keyboard) {
          node.focus();
          if (again) read(again);
        }
      }
    }
    keyboard = false;
    draws += 1;
    const drawn = current ? positionWindow({ r0: current.area.row0, r1: current.area.row0 + current.area.rows,
      c0: current.area.col0, c1: current.area.col0 + current.area.cols }, rowPositions(), colPositions()) : [];
    Object.assign(outer.dataset, { title: model.get("title"), rows: rowTokens.length, cols: colTokens.length, draws,
      window: drawn.join(","), drawMs: (performance.now() - started).toFixed(1) });
    showRanges();
  }

  function zoom(direction, centre) {
    const { rows, cols } = size();
    const win = shownWindow();
    const at = centre || { row: Math.floor((win.r0 + win.r1) / 2), col: Math.floor((win.c0 + win.c1) / 2) };
    const next = zoomWindow(win, direction, at, rows, cols);
    if (next.r0 !== win.r0 || next.r1 !== win.r1 || next.c0 !== win.c0 || next.c1 !== win.c1) ask(next);
  }

  function onMove(event) {
    if (!current) return;
    const box = current.svg.getBoundingClientRect();
    const k = current.width / box.width || 1;
    const cell = cellAt(current.area, (event.clientX - box.left) * k, (event.clientY - box.top) * k);
    if (!cell) { if (chosen) forget(); return; }
    if (!chosen || chosen.row !== cell.row || chosen.col !== cell.col) read(cell);
  }

  function select(cell) {
    if (!cell || !current) return;
    model.set("selected", [current.rowPositions[cell.row], current.colPositions[cell.col]]);
    model.save_changes();
  }

  function onKey(event) {
    if (!current) return;
    const { rows, cols } = size();
    if (event.key === "Escape") {
      const win = shownWindow();
      if (win.r1 - win.r0 < rows || win.c1 - win.c0 < cols) {
        keyboard = true;
        ask({ r0: 0, r1: rows, c0: 0, c1: cols });
      } else {
        forget();
      }
      return;
    }
    if (event.key === "+" || event.key === "=" || event.key === "-" || event.key === "_") {
      event.preventDefault();
      keyboard = true;
      zoom(event.key === "+" || event.key === "=" ? 1 : -1, chosen);
      return;
    }
    if ((event.key === "Enter" || event.key === " ") && chosen) {
      event.preventDefault();
      keyboard = true;
      select(chosen);
      return;
    }
    const cell = moveCell(chosen, event.key, rows, cols);
    if (!cell) return;
    event.preventDefault(); // the arrows move between cells, not the page
    const win = shownWindow();
    const moved = followCell(win, cell);
    if (moved.r0 !== win.r0 || moved.c0 !== win.c0) {
      chosen = cell;
      keyboard = true;
      ask(moved); // the kernel draws the window that shows the cell; read() runs again once it is on screen
    } else {
      read(cell);
    }
  }

  function onWheel(event) {
    if (!current || !event.deltaY) return;
    const box = current.svg.getBoundingClientRect();
    const k = current.width / box.width || 1;
    const cell = cellAt(current.area, (event.clientX - box.left) * k, (event.clientY - box.top) * k);
    if (!cell) return;
    event.preventDefault(); // over the cells the wheel zooms, elsewhere it scrolls the page
    zoom(event.deltaY < 0 ? 1 : -1, cell);
  }

  function onRange(side) {
    const [from, to] = inputs[side].map((input) => Number(input.value));
    if (!Number.isInteger(from) || !Number.isInteger(to)) return;
    const win = shownWindow();
    const next = typedWindow(win, side, from, to, rowPositions(), colPositions());
    if (next !== win) ask(next);
  }

  zoomIn.addEventListener("click", () => zoom(1, chosen));
  zoomOut.addEventListener("click", () => zoom(-1, chosen));
  reset.addEventListener("click", () => { const { rows, cols } = size(); ask({ r0: 0, r1: rows, c0: 0, c1: cols }); });
  for (const side of ["query", "key"]) {
    for (const input of inputs[side]) {
      input.addEventListener("change", () => onRange(side));
      input.addEventListener("keydown", (event) => { if (event.key === "Enter") onRange(side); });
    }
  }
  stage.addEventListener("mousemove", onMove);
  stage.addEventListener("mouseleave", forget);
  stage.addEventListener("wheel", onWheel, { passive: false });
  stage.addEventListener("click", (event) => {
    if (!current) return;
    const box = current.svg.getBoundingClientRect();
    const k = current.width / box.width || 1;
    select(cellAt(current.area, (event.clientX - box.left) * k, (event.clientY - box.top) * k));
  });
  const schedule = redrawScheduler(draw); // one redraw per batch of changes: a layer change sets every trait at once
  const names = ["svg", "values", "row_tokens", "col_tokens", "row_positions", "col_positions", "title"];
  for (const name of names) model.on("change:" + name, schedule);
  // opened from a thumbnail: focus the cells once they are drawn and shown (the view may still be hidden, or be
  // redrawn, for a few frames), so Enter on a thumbnail leaves the keyboard here, not on the page
  function takeFocus(tries = 0) {
    keyboard = true;
    if (current && current.node.isConnected) {
      current.node.focus();
      if (document.activeElement === current.node) {
        keyboard = false; // focused: a later redraw keeps it only if it is still here
        return;
      }
    }
    if (tries < 300) requestAnimationFrame(() => takeFocus(tries + 1));
    else keyboard = false;
  }
  const onFocusRequest = () => takeFocus();
  model.on("change:focus_request", onFocusRequest);
  draw();
  return () => {
    for (const name of names) model.off("change:" + name, schedule);
    model.off("change:focus_request", onFocusRequest);
  };
}

export default { render };
