import {
  showFigure, stepIndex, svgEl, typed, followDrawing, viewFrame, keepKeysInPanel, windowFirst, wheeledFirst,
} from "./shared.js";

// The neuron view: shows the kernel's drawing (figures/neuron.py, the same SVG the static copy and exports hold) and
// adds what needs no kernel: hover over a vector cell or a key row shows the exact numbers from the float32 buffers
// the view holds (q, k, products, scores, weights); a key row or key token clicked, or Enter on a focused row, asks
// the kernel to make that key the query. The key rows are one tab stop, and the keyboard reads what hover reads: the
// up and down arrows, Home, End and the page keys move a row cursor (the row's score and weight shown in the hover
// box), the left and right arrows move along the row's dimensions (q, k and q ⊙ k of that dimension shown, the cells
// framed), Enter or Space makes the row's key the query, Escape takes the cursor back to the query's row. A long
// text draws a window of keys: the cursor moved past its edge, or the wheel, asks the kernel for another (`first`),
// and the cursor stays on its key when that window is drawn.
//
// What it reads from the drawing (data- attributes the figure writes):
//   svg.bvl-neuron          data-title, data-query (the query's position), data-rows, data-head-size, data-keys,
//                           data-first, data-query-row (the window's place among all the keys)
//   image.bvl-block         data-block (q | k | products), data-x, data-y, data-rows, data-cols, data-cell-w, data-row-h
//   g.bvl-key-rows          data-x, data-y, data-row-h, data-rows, data-right: where the key rows are
//   text.bvl-key            data-index (the row), data-position (the key's position in the input)
// Token text is only ever set with textContent.

// A number as hover shows it: six significant digits of the float32 value.
export function valueText(value) {
  if (!Number.isFinite(value)) return String(value);
  return String(Number.parseFloat(value.toPrecision(6)));
}

// The cell {row, col} of a vector block under the point (x, y) in the SVG's pixels, or null outside it.
export function cellAt(x, y, block) {
  const col = Math.floor((x - block.x) / block.cellW), row = Math.floor((y - block.y) / block.rowH);
  if (!(row >= 0 && col >= 0 && row < block.rows && col < block.cols)) return null;
  return { row, col };
}

// The key row under the point (x, y) in the SVG's pixels, or -1 outside the rows.
export function rowAt(x, y, rows) {
  const row = Math.floor((y - rows.y) / rows.rowH);
  return x >= rows.x && x < rows.right && row >= 0 && row < rows.rows ? row : -1;
}

// The row a key moves to from `current` among `count` rows (up/down arrows, Home, End; the page keys step ten), or
// null for a key that does not move the row.
export function nextRow(current, key, count) {
  return ["ArrowUp", "ArrowDown", "PageUp", "PageDown", "Home", "End"].includes(key) ?
    stepIndex(current, key, count, 10) : null;
}

// Where a key takes the row cursor from row `row` of all `keys`, a window of `rows` from `first` drawn: {row, first}
// (the row among all the keys, and the window that shows it, moved as little as it takes); null for another key.
export function nextKey(row, key, first, rows, keys) {
  const to = nextRow(row, key, keys);
  return to === null ? null : { row: to, first: windowFirst(to, first, keys, rows) };
}

// The dimension the left and right arrows move to from `current` among `count` (-1: the row as a whole, before the
// first dimension), or null for another key.
export function nextDimension(current, key, count) {
  if (!count || (key !== "ArrowLeft" && key !== "ArrowRight")) return null;
  return Math.max(-1, Math.min(count - 1, current + (key === "ArrowRight" ? 1 : -1)));
}

// The hover text of a key row: which key, its score and its softmax weight.
export function rowTip(position, token, score, weight) {
  return `key ${position}·${token}\nq·k/√d = ${valueText(score)}\nsoftmax = ${valueText(weight)}`;
}

// The hover text of one vector cell: whose vector, which dimension, which block, the value.
export function cellTip(who, dimension, block, value) {
  const name = block === "products" ? "q ⊙ k" : block;
  return `${who}\ndimension ${dimension}\n${name} = ${valueText(value)}`;
}

// What the keyboard's cell says: whose row, which dimension, and q, k and q ⊙ k there.
export function dimensionTip(who, dimension, q, k, product) {
  return `${who}\ndimension ${dimension}\nq = ${valueText(q)}\nk = ${valueText(k)}\nq ⊙ k = ${valueText(product)}`;
}

function numbers(element, names) {
  const out = {};
  for (const [key, attribute] of Object.entries(names)) out[key] = Number(element.getAttribute(attribute));
  return out;
}

function render({ model, el }) {
  keepKeysInPanel(el);
  const { outer, holder, tip } = viewFrame(el, "bvl-neuron-view bvl-view"); // the tooltip reads the keyboard's row
  let figure = null, current = null;

  function hide() {
    tip.style.display = "none";
  }

  function place(text, x, y) {
    tip.textContent = text;
    tip.style.display = "block";
    tip.style.left = x + 12 + "px";
    tip.style.top = y + 8 + "px";
  }

  function ask(position) {
    if (Number.isInteger(position)) model.send({ type: "query", position });
  }

  // the keyboard's place: a frame over row `r` (and over dimension `c` of its k and q ⊙ k, c >= 0), its numbers in
  // the hover box beside it, as hover shows them
  function moveCursor(r, c) {
    const { rows, tokens, positions, scores, weights, cursor, cells, blocks } = current;
    current.row = r;
    current.col = c;
    for (const [name, value] of Object.entries({ x: rows.x - 1, y: rows.y + r * rows.rowH - 0.5,
      width: rows.right - rows.x + 2, height: rows.rowH + 1 })) cursor.setAttribute(name, value);
    cursor.setAttribute("visibility", "visible");
    const key = `key ${positions[r]}·${tokens[r]}`;
    outer.dataset.cursor = `${r}:${c}`;
    if (c < 0) {
      for (const cell of cells) cell.setAttribute("visibility", "hidden");
      current.group.setAttribute("aria-label", `${key}: Enter makes it the query, arrows move`);
      place(rowTip(positions[r], tokens[r], scores[r], weights[r]), rows.right, rows.y + (r + 1) * rows.rowH);
      return;
    }
    const framed = blocks.filter((block) => block.name !== "q");
    framed.forEach((block, index) => {
      for (const [name, value] of Object.entries({ x: block.x + c * block.cellW - 1, y: block.y + r * block.rowH - 1,
        width: block.cellW + 2, height: block.rowH + 2 })) cells[index].setAttribute(name, value);
      cells[index].setAttribute("visibility", "visible");
    });
    const d = framed.length ? framed[0].cols : 0;
    const text = dimensionTip(key, c, current.q[c], current.k[r * d + c], current.products[r * d + c]);
    current.group.setAttribute("aria-label", text.replaceAll("\n", ", "));
    const last = framed[framed.length - 1];
    place(text, last ? last.x + (c + 1) * last.cellW : rows.right, rows.y + (r + 1) * rows.rowH);
  }

  let asked = null; // the row (among all the keys) and dimension the keyboard moved to, in a window not drawn yet
  let wheelFirst = null; // the window the wheel asked for and not drawn yet, so quick turns add up

  function askWindow(first) {
    model.set("first", first);
    model.save_changes();
  }

  function draw() {
    hide();
    wheelFirst = null;
    const focused = holder.contains(document.activeElement); // a key chosen by keyboard: focus stays on the rows
    figure = showFigure(holder, model.get("svg"));
    current = null;
    const group = figure && figure.querySelector("g.bvl-key-rows");
    if (!group) return;
    const rows = numbers(group, { x: "data-x", y: "data-y", rowH: "data-row-h", rows: "data-rows",
      right: "data-right" });
    const blocks = [...figure.querySelectorAll("image.bvl-block")].map((image) => ({
      name: image.dataset.block, ...numbers(image, { x: "data-x", y: "data-y", rows: "data-rows",
        cols: "data-cols", cellW: "data-cell-w", rowH: "data-row-h" }) }));
    const cursor = svgEl(group, "rect", { class: "bvl-row-cursor", visibility: "hidden" });
    const cells = blocks.filter((block) => block.name !== "q")
      .map(() => svgEl(figure, "rect", { class: "bvl-cell-cursor", visibility: "hidden" }));
    current = { rows, blocks, group, cursor, cells, col: -1, tokens: model.get("key_tokens"),
      positions: model.get("key_positions"),
      q: typed(model.get("q"), Float32Array), k: typed(model.get("k"), Float32Array),
      products: typed(model.get("products"), Float32Array), scores: typed(model.get("scores"), Float32Array),
      weights: typed(model.get("weights"), Float32Array) };
    current.first = Number(figure.dataset.first || 0);
    current.keys = Number(figure.dataset.keys || rows.rows);
    current.row = Math.max(0, current.positions.indexOf(Number(figure.dataset.query)));
    if (asked && asked.row >= current.first && asked.row < current.first + rows.rows) {
      current.row = asked.row - current.first;
      current.col = asked.col;
    }
    asked = null;
    group.setAttribute("tabindex", "0");
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", "key rows: up and down arrows move between keys, left and right along a " +
      "key's dimensions, Enter makes the key the query, Escape goes back to the query");
    if (focused) group.focus();
  }

  function onMove(event) {
    if (!current) return;
    const box = figure.getBoundingClientRect();
    const x = event.clientX - box.left, y = event.clientY - box.top;
    for (const block of current.blocks) {
      const cell = cellAt(x, y, block);
      if (!cell) continue;
      const who = block.name === "q" ? "query" :
        `key ${current.positions[cell.row]}·${current.tokens[cell.row]}`;
      const value = current[block.name][cell.row * block.cols + cell.col];
      place(cellTip(who, cell.col, block.name, value), x, y);
      return;
    }
    const r = rowAt(x, y, current.rows);
    if (r >= 0) place(rowTip(current.positions[r], current.tokens[r], current.scores[r], current.weights[r]), x, y);
    else hide();
  }

  // a key's label, or anywhere on its row of bars, makes that key the query
  function onClick(event) {
    if (!current) return;
    const label = event.target.closest && event.target.closest("text.bvl-key[data-position]");
    if (label) {
      ask(Number(label.getAttribute("data-position")));
      return;
    }
    const box = figure.getBoundingClientRect();
    const r = rowAt(event.clientX - box.left, event.clientY - box.top, current.rows);
    if (r >= 0) ask(current.positions[r]);
  }

  function onKey(event) {
    if (!current || event.target !== current.group || event.altKey || event.ctrlKey || event.metaKey) return;
    const { first, keys } = current, count = current.rows.rows, dimensions = current.q.length;
    let to = null; // [row among all the keys, dimension]
    if (event.key === "Enter" || event.key === " ") {
      ask(current.positions[current.row]);
    } else if (event.key === "Escape") {
      const queryRow = Number(figure.dataset.queryRow);
      to = [queryRow >= 0 ? queryRow : first + current.row, -1];
    } else {
      const row = nextKey(first + current.row, event.key, first, count, keys);
      const col = nextDimension(current.col, event.key, dimensions);
      if (row === null && col === null) return;
      to = [row === null ? first + current.row : row.row, col === null ? current.col : col];
    }
    event.preventDefault();
    event.stopPropagation(); // the notebook's own keys (Enter edits a cell, arrows move between cells) stay out
    if (!to) return;
    const [row, col] = to;
    if (row >= first && row < first + count) {
      moveCursor(row - first, col);
    } else {
      asked = { row, col };
      askWindow(windowFirst(row, first, keys, count));
    }
  }

  function onWheel(event) {
    if (!current || !event.deltaY || current.keys <= current.rows.rows) return; // all drawn: the page scrolls
    const from = wheelFirst === null ? current.first : wheelFirst;
    const first = wheeledFirst(from, event.deltaY, current.keys, current.rows.rows);
    event.preventDefault();
    if (first === from) return;
    wheelFirst = first;
    askWindow(first);
  }

  function onFocus(event) {
    if (current && event.target === current.group) moveCursor(current.row, current.col);
  }

  function onBlur() {
    if (current) for (const mark of [current.cursor, ...current.cells]) mark.setAttribute("visibility", "hidden");
    hide();
  }

  holder.addEventListener("mousemove", onMove);
  holder.addEventListener("mouseleave", hide);
  holder.addEventListener("click", onClick);
  holder.addEventListener("keydown", onKey);
  holder.addEventListener("focusin", onFocus);
  holder.addEventListener("focusout", onBlur);
  holder.addEventListener("wheel", onWheel, { passive: false });
  return followDrawing(model, draw);
}

export default { render };
