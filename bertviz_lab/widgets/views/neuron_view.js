import { showFigure, stepIndex, svgEl, tooltip, typed, redrawScheduler } from "./shared.js";

// The neuron view: shows the kernel's drawing (figures/neuron.py, the same SVG the static copy and exports hold) and
// adds what needs no kernel: hover over a vector cell or a key row shows the exact numbers from the float32 buffers
// the view holds (q, k, products, scores, weights); a key row or key token clicked, or Enter on a focused row, asks
// the kernel to make that key the query. The key rows are one tab stop: the arrow keys, Home, End and the page keys
// move a row cursor (its numbers shown as on hover), Enter or Space makes its key the query.
//
// What it reads from the drawing (data- attributes the figure writes):
//   svg.bvl-neuron          data-title, data-query (the query's position), data-rows, data-head-size
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

// The row a key moves to from `current` among `count` rows (the page keys step ten), or null for a key that does not
// move.
export function nextRow(current, key, count) {
  return stepIndex(current, key, count, 10);
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

function numbers(element, names) {
  const out = {};
  for (const [key, attribute] of Object.entries(names)) out[key] = Number(element.getAttribute(attribute));
  return out;
}

function render({ model, el }) {
  const outer = document.createElement("div");
  outer.className = "bvl-neuron-view bvl-view";
  const holder = document.createElement("div");
  const tip = tooltip();
  tip.setAttribute("aria-live", "polite"); // the keyboard's row is read out as it moves
  outer.append(holder, tip);
  el.appendChild(outer);
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

  // the keyboard's row: a frame over the row, its numbers in the hover box
  function moveCursor(r) {
    const { rows, tokens, positions, scores, weights, cursor } = current;
    current.row = r;
    for (const [name, value] of Object.entries({ x: rows.x - 1, y: rows.y + r * rows.rowH - 0.5,
      width: rows.right - rows.x + 2, height: rows.rowH + 1 })) cursor.setAttribute(name, value);
    cursor.setAttribute("visibility", "visible");
    current.group.setAttribute("aria-label", `key ${positions[r]}·${tokens[r]}: Enter makes it the query`);
    place(rowTip(positions[r], tokens[r], scores[r], weights[r]), rows.right, rows.y + (r + 1) * rows.rowH);
  }

  function draw() {
    hide();
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
    current = { rows, blocks, group, cursor, tokens: model.get("key_tokens"), positions: model.get("key_positions"),
      q: typed(model.get("q"), Float32Array), k: typed(model.get("k"), Float32Array),
      products: typed(model.get("products"), Float32Array), scores: typed(model.get("scores"), Float32Array),
      weights: typed(model.get("weights"), Float32Array) };
    current.row = Math.max(0, current.positions.indexOf(Number(figure.dataset.query)));
    group.setAttribute("tabindex", "0");
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", "key rows: arrow keys move, Enter makes a key the query");
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
    if (!current || event.target !== current.group) return;
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      ask(current.positions[current.row]);
      return;
    }
    const next = nextRow(current.row, event.key, current.rows.rows);
    if (next === null) return;
    event.preventDefault();
    moveCursor(next);
  }

  function onFocus(event) {
    if (current && event.target === current.group) moveCursor(current.row);
  }

  function onBlur() {
    if (current) current.cursor.setAttribute("visibility", "hidden");
    hide();
  }

  holder.addEventListener("mousemove", onMove);
  holder.addEventListener("mouseleave", hide);
  holder.addEventListener("click", onClick);
  holder.addEventListener("keydown", onKey);
  holder.addEventListener("focusin", onFocus);
  holder.addEventListener("focusout", onBlur);
  const schedule = redrawScheduler(draw);
  model.on("change:svg", schedule);
  draw();
  return () => model.off("change:svg", schedule);
}

export default { render };
