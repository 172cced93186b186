import { showFigure, followDrawing, viewFrame, tipBeside, keepKeysInPanel } from "./shared.js";
// The causal figures (activation patching, the logit lens, FFN neurons). The kernel draws the whole figure (one SVG
// document, the one the static copy and exports hold) following figures/cell_grid.py's contract: every cell is an
// element of class bvl-cell with data-row, data-col and data-tip, the exact text hover shows. This module shows the
// drawing and adds what needs no kernel: hover over a cell, or the keyboard on it, shows its data-tip; the arrow keys
// move between cells by row and column (Home and End to a row's ends, PageUp and PageDown to a column's); a click,
// Enter or Space opens the cell (a message to the kernel: {type: "open", row, col}), unless it has
// data-opens="false". One cell at a time is a tab stop (the opened one, else the first), so Tab leaves the figure.
// Text is only ever set with textContent.
//
// The view's element (div.bvl-cell-grid-view) says what it shows, for tools and tests: data-title, data-cells,
// data-selected ("row,col" or ""), data-draws, data-message; while a cell is read, data-cell ("row,col") and
// data-tip (its text).

// The cells of a figure as a grid: row number -> that row's cells sorted by column.
export function gridOf(cells) {
  const rows = new Map();
  for (const cell of cells) {
    const row = Number(cell.dataset.row);
    if (!rows.has(row)) rows.set(row, []);
    rows.get(row).push(cell);
  }
  for (const list of rows.values()) list.sort((a, b) => Number(a.dataset.col) - Number(b.dataset.col));
  return rows;
}

// The cell of `row` nearest to column `col` (ties to the left), or null for a row the grid does not have.
function nearestInRow(rows, row, col) {
  const list = rows.get(row);
  if (!list || !list.length) return null;
  let best = list[0];
  for (const cell of list) {
    if (Math.abs(Number(cell.dataset.col) - col) < Math.abs(Number(best.dataset.col) - col)) best = cell;
  }
  return best;
}

// The cell a key moves to from `cell`: ←/→ along its row, ↑/↓ to the nearest cell of the row above or below,
// Home/End to its row's ends, PageUp/PageDown to the first/last row; null for a key that does not move.
export function nextCell(rows, cell, key) {
  const row = Number(cell.dataset.row), col = Number(cell.dataset.col);
  const list = rows.get(row), at = list.indexOf(cell);
  const order = [...rows.keys()].sort((a, b) => a - b), index = order.indexOf(row);
  switch (key) {
    case "ArrowLeft": return list[Math.max(0, at - 1)];
    case "ArrowRight": return list[Math.min(list.length - 1, at + 1)];
    case "Home": return list[0];
    case "End": return list[list.length - 1];
    case "ArrowUp": return nearestInRow(rows, order[Math.max(0, index - 1)], col);
    case "ArrowDown": return nearestInRow(rows, order[Math.min(order.length - 1, index + 1)], col);
    case "PageUp": return nearestInRow(rows, order[0], col);
    case "PageDown": return nearestInRow(rows, order[order.length - 1], col);
    default: return null;
  }
}

// "row,col" of a cell, as data-cell and data-selected write it.
export function cellKey(cell) {
  return `${cell.dataset.row},${cell.dataset.col}`;
}

function render({ model, el }) {
  keepKeysInPanel(el);
  const { outer, holder, tip } = viewFrame(el, "bvl-cell-grid-view bvl-view");
  const message = document.createElement("div");
  message.className = "bvl-grid-message";
  message.setAttribute("role", "status");
  outer.prepend(message);
  let cells = [], rows = new Map(), draws = 0;

  function hide() {
    tip.style.display = "none";
    for (const cell of cells) cell.classList.remove("bvl-lit");
    delete outer.dataset.cell;
    delete outer.dataset.tip;
  }

  function read(cell) {
    hide();
    cell.classList.add("bvl-lit");
    tip.textContent = cell.dataset.tip || "";
    tipBeside(tip, outer, cell);
    outer.dataset.cell = cellKey(cell);
    outer.dataset.tip = cell.dataset.tip || "";
  }

  function open(cell) {
    if (cell.dataset.opens === "false") return;
    model.send({ type: "open", row: Number(cell.dataset.row), col: Number(cell.dataset.col) });
  }

  function stop(cell) { // the one cell Tab reaches
    for (const other of cells) other.setAttribute("tabindex", other === cell ? "0" : "-1");
  }

  function draw() {
    const focused = holder.contains(document.activeElement) ? document.activeElement : null;
    const focusedKey = focused && focused.dataset && focused.dataset.row !== undefined ? cellKey(focused) : null;
    hide();
    const text = model.get("message");
    message.textContent = text;
    message.style.display = text ? "block" : "none";
    const figure = showFigure(holder, model.get("svg"));
    if (figure) {
      figure.setAttribute("role", "group");
      figure.setAttribute("aria-label", model.get("label") || model.get("title"));
    }
    cells = figure ? [...figure.querySelectorAll(".bvl-cell")] : [];
    rows = gridOf(cells);
    const selected = model.get("selected");
    const selectedKey = selected && selected.length === 2 ? `${selected[0]},${selected[1]}` : "";
    let start = cells[0];
    for (const cell of cells) {
      for (const title of cell.querySelectorAll(":scope > title")) title.remove(); // the tooltip says it
      const opens = cell.dataset.opens !== "false";
      cell.setAttribute("role", opens ? "button" : "img");
      cell.setAttribute("aria-label", cell.dataset.tip || "");
      cell.classList.toggle("bvl-opens", opens);
      cell.classList.toggle("bvl-selected", cellKey(cell) === selectedKey);
      if (cellKey(cell) === selectedKey) start = cell;
    }
    if (start) stop(start);
    const again = focusedKey && cells.find((cell) => cellKey(cell) === focusedKey);
    if (again) {
      stop(again);
      again.focus();
    }
    draws += 1;
    Object.assign(outer.dataset, { title: model.get("title"), cells: cells.length, selected: selectedKey, draws,
      message: text });
  }

  const cellOf = (node) => {
    const cell = node.closest ? node.closest(".bvl-cell") : null;
    return cell && holder.contains(cell) ? cell : null;
  };
  holder.addEventListener("mouseover", (event) => {
    const cell = cellOf(event.target);
    if (cell) read(cell);
    else hide();
  });
  holder.addEventListener("mouseleave", hide);
  holder.addEventListener("click", (event) => {
    const cell = cellOf(event.target);
    if (cell) open(cell);
  });
  holder.addEventListener("focusin", (event) => {
    const cell = cellOf(event.target);
    if (cell) {
      stop(cell);
      read(cell);
    }
  });
  holder.addEventListener("focusout", hide);
  holder.addEventListener("keydown", (event) => {
    const cell = cellOf(event.target);
    if (!cell) return;
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      open(cell);
      return;
    }
    if (event.key === "Escape") {
      hide();
      return;
    }
    const next = nextCell(rows, cell, event.key);
    if (!next) return;
    event.preventDefault();
    stop(next);
    next.focus();
  });
  return followDrawing(model, draw, ["svg", "message", "selected"]);
}

export default { render };
