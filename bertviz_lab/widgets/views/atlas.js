import { showFigure, typed, followDrawing, viewFrame, stepIndex, svgEl, tipBeside, rowKey, keepKeysInPanel } from "./shared.js";
// The head atlas. The kernel draws the whole figure (figures/atlas.py: one SVG document, the one the static copy and
// exports hold); this module shows it and adds what needs no kernel: hover over a cell, or the arrow keys once the
// grid has focus, show the head's exact value and how many queries it averages, from the float32 `values` and int32
// `queries` the view holds. A click on a cell, or Enter, chooses the head: the kernel's `selected` trait ([layer,
// head]) marks it and the kernel lists its top texts under the grid. Each listed text is a tab stop (the arrow keys
// move between them); hover shows it whole, and a click or Enter opens it in the attention panel (a message to the
// kernel: {type: "open", index}). Text is only ever set with textContent.
//
// The view's element (div.bvl-atlas-view) says what it shows, for tools and tests: data-title, data-selected
// ("layer,head" or ""), data-texts (texts listed), data-draws; while a cell is read, data-cell ("layer,head") and
// data-value (as the tooltip writes it).

// A statistic's value as hover writes it: four decimals, as Python's "{:.4f}" (figures.atlas.value_text).
export function valueText(value) {
  return Number.isFinite(value) ? value.toFixed(4) : "nan";
}

// What the tooltip says about one head: which it is, its value in the statistic's unit, the queries it averages.
export function atlasTip(layer, head, name, unit, value, queries) {
  return `layer ${layer} · head ${head}\n${name}: ${valueText(value)} ${unit}\n` +
    `mean over ${Number(queries).toLocaleString("en-US")} queries`;
}

// What the tooltip says about a listed text: its id, its value, and the whole text.
export function textTip(textId, value, text) {
  return `#${textId} · ${valueText(value)}\n${text}`;
}

// The cell {row, col} a key moves to from `cell` in a grid of rows × cols (the first cell when none is read yet):
// the arrows step one, Home and End go to the row's ends; null for a key that does not move.
export function moveCell(cell, key, rows, cols) {
  if (!["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Home", "End"].includes(key) || !rows || !cols) return null;
  if (!cell) return { row: 0, col: 0 };
  if (key === "ArrowUp" || key === "ArrowDown") return { row: stepIndex(cell.row, key, rows), col: cell.col };
  return { row: cell.row, col: stepIndex(cell.col, key, cols) };
}

function render({ model, el }) {
  keepKeysInPanel(el);
  const { outer, holder, tip } = viewFrame(el, "bvl-corpus-view bvl-atlas-view bvl-view");
  let current = null, cursor = null, draws = 0;

  function hide() {
    tip.style.display = "none";
    if (current) current.mark.setAttribute("visibility", "hidden");
    for (const row of outer.querySelectorAll(".bvl-lit")) row.classList.remove("bvl-lit");
    delete outer.dataset.cell;
    delete outer.dataset.value;
  }

  // Reads one cell {row, col}: its tooltip, its mark, the view's data-cell.
  function read(cell) {
    if (!current || !cell) { hide(); return; }
    hide();
    cursor = cell;
    const { area, layers, heads } = current;
    const index = cell.row * heads.length + cell.col;
    const value = current.values[index];
    tip.textContent = atlasTip(layers[cell.row], heads[cell.col], model.get("stat_name"), model.get("unit"), value,
      current.queries[index]);
    const rect = area.querySelector(`rect.bvl-atlas-cell[data-layer="${layers[cell.row]}"]` +
      `[data-head="${heads[cell.col]}"]`);
    current.mark.setAttribute("transform", `translate(${rect.getAttribute("x")},${rect.getAttribute("y")})`);
    current.mark.setAttribute("visibility", "visible");
    tipBeside(tip, outer, rect);
    Object.assign(outer.dataset, { cell: `${layers[cell.row]},${heads[cell.col]}`, value: valueText(value) });
  }

  function readText(row) {
    hide();
    const i = Number(row.dataset.index);
    row.classList.add("bvl-lit");
    tip.textContent = textTip(model.get("top_ids")[i], model.get("top_values")[i], model.get("top_texts")[i]);
    tipBeside(tip, outer, row);
  }

  function choose(cell) {
    if (!current || !cell) return;
    model.set("selected", [current.layers[cell.row], current.heads[cell.col]]);
    model.save_changes();
  }

  function open(row) {
    model.send({ type: "open", index: Number(row.dataset.index) });
  }

  function draw() {
    const focused = holder.contains(document.activeElement) ? document.activeElement : null;
    const focus = focused && (focused.classList.contains("bvl-atlas-cells") ? "grid" : focused.dataset.index);
    const again = cursor;
    hide();
    const figure = showFigure(holder, model.get("svg"));
    const area = figure && figure.querySelector("g.bvl-atlas-cells");
    current = null;
    if (area) {
      const size = Number(area.dataset.cell);
      const mark = svgEl(figure, "g", { class: "bvl-corpus-mark", visibility: "hidden" });
      svgEl(mark, "rect", { class: "bvl-heatmap-mark-halo", width: size, height: size });
      svgEl(mark, "rect", { class: "bvl-heatmap-mark-line", width: size, height: size });
      area.setAttribute("tabindex", "0");
      area.setAttribute("role", "img");
      area.setAttribute("aria-label", `${model.get("stat_name")} of every head: the arrow keys read one head after ` +
        "another, Enter lists its top texts");
      current = { area, mark, layers: model.get("layers"), heads: model.get("heads"),
        values: typed(model.get("values"), Float32Array), queries: typed(model.get("queries"), Int32Array) };
    }
    const rows = figure ? [...figure.querySelectorAll("g.bvl-top-text")] : [];
    for (const row of rows) {
      row.setAttribute("tabindex", "0");
      row.setAttribute("role", "button");
      row.setAttribute("aria-label", `open text #${row.dataset.textId} in the attention panel`);
    }
    if (focus === "grid" && area) {
      area.focus();
      if (again) read(again);
    } else if (focus !== null && focus !== undefined && rows[Number(focus)]) {
      rows[Number(focus)].focus();
    }
    draws += 1;
    Object.assign(outer.dataset, { title: model.get("title"), selected: model.get("selected").join(","),
      texts: rows.length, draws });
  }

  function cellOf(node) {
    if (!current || !node.closest) return null;
    const rect = node.closest("rect.bvl-atlas-cell");
    if (!rect) return null;
    return { row: current.layers.indexOf(Number(rect.dataset.layer)),
      col: current.heads.indexOf(Number(rect.dataset.head)) };
  }

  const rowOf = (node) => (node.closest ? node.closest("g.bvl-top-text") : null);

  holder.addEventListener("mouseover", (event) => {
    const cell = cellOf(event.target), row = rowOf(event.target);
    if (cell) read(cell);
    else if (row) readText(row);
    else hide();
  });
  holder.addEventListener("mouseleave", hide);
  holder.addEventListener("click", (event) => {
    const cell = cellOf(event.target), row = rowOf(event.target);
    if (cell) choose(cell);
    else if (row) open(row);
  });
  holder.addEventListener("focusin", (event) => {
    const row = rowOf(event.target);
    if (row) readText(row);
    else if (current && event.target === current.area && !cursor) read({ row: 0, col: 0 });
    else if (current && event.target === current.area) read(cursor);
  });
  holder.addEventListener("focusout", hide);
  holder.addEventListener("keydown", (event) => {
    const row = rowOf(event.target);
    if (row) {
      rowKey(event, [...holder.querySelectorAll("g.bvl-top-text")], row, open);
      return;
    }
    if (!current || event.target !== current.area) return;
    if ((event.key === "Enter" || event.key === " ") && cursor) {
      event.preventDefault();
      choose(cursor);
      return;
    }
    if (event.key === "Escape") { hide(); cursor = null; return; }
    const next = moveCell(cursor, event.key, current.layers.length, current.heads.length);
    if (next === null) return;
    event.preventDefault();
    read(next);
  });
  return followDrawing(model, draw);
}

export default { render };
