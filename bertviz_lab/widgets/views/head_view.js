import {
  showFigure, redrawScheduler, svgEl, stepIndex, keepKeysInPanel, windowFirst, wheeledFirst,
} from "./shared.js";
// The bertviz-style head view. The kernel draws the figure (figures/head_view.py: query tokens left, key tokens right,
// a line per (query, key) of each shown head) and this module shows it and adds what a pointer and a keyboard do:
// - a head chip (g.bvl-head-chip[data-head]) clicked, or Enter/Space on it, shows or hides that head; a double click
//   shows it alone; the choice goes to the kernel in `heads`, which draws again;
// - a token (text.bvl-token[data-side][data-index]) hovered or focused shows only its lines: the class bvl-hovering on
//   the figure and bvl-lit on its lines (head_view.css), no kernel round trip;
// - a query token clicked (or Enter/Space), or a line clicked, asks the panel to open the neuron view on that query
//   (message {type: "open", query, head}).
// - a long text shows a window of rows around the selected query: the arrow keys (Home, End and the page keys too) on
//   a query token select the query above or below, and the window follows; the wheel moves the window alone. Both go
//   to the kernel (`query`, `first`), which draws that window.
// Data attributes the figure carries for this (and for tests): root data-heads, data-lines, data-query, data-first,
// data-rows, data-queries; chip data-head and data-on; token data-side and data-index; line groups g[data-head] >
// g[data-q] > line[data-key]. The view's element says what it shows: data-title (the drawing's title), data-draws,
// data-query, data-first. The figure is parsed as XML (showFigure); the only text set here is a query token's hover
// hint, with textContent.

// The heads shown after a click on `head`'s chip: toggled, in ascending order.
export function toggledHeads(heads, head) {
  const next = heads.includes(head) ? heads.filter((h) => h !== head) : [...heads, head];
  return next.sort((a, b) => a - b);
}

// The CSS selector of the lines of a token: a query row's lines, or the lines ending at a key row.
export function linesOf(side, index) {
  const at = Number(index);
  if (!Number.isInteger(at) || at < 0) throw new RangeError(`token index must be a whole number >= 0, got ${index}`);
  if (side === "query") return `g.bvl-head-lines > g[data-q="${at}"] > line`;
  if (side === "key") return `g.bvl-head-lines line[data-key="${at}"]`;
  throw new RangeError(`side must be "query" or "key", got ${side}`);
}

// What activating an element of the figure does: {toggle: head}, {open: {query, head}}, or null (nothing).
// `target` is an element's data: {kind: "chip"|"token"|"line", head, side, index, query}; `shown` the heads on.
export function action(target, shown) {
  if (!target) return null;
  if (target.kind === "chip") return { toggle: target.head };
  if (target.kind === "token" && target.side === "query") {
    return { open: { query: target.index, head: shown.length ? Math.min(...shown) : -1 } };
  }
  if (target.kind === "line") return { open: { query: target.query, head: target.head } };
  return null;
}

// The query row a key selects from `current` (none yet: the window's first row) among `count`, the page keys stepping
// a window of `rows`; null for a key that does not move the query.
export function nextQuery(current, key, count, rows, first) {
  if (!["ArrowUp", "ArrowDown", "PageUp", "PageDown", "Home", "End"].includes(key)) return null;
  return current < 0 ? Math.min(first, count - 1) : stepIndex(current, key, count, rows);
}

// The element of the figure an event landed on, as action() reads it (null: none that does anything).
function targetOf(node) {
  const element = node && node.closest ? node : null;
  if (!element) return null;
  const chip = element.closest("g.bvl-head-chip");
  if (chip) return { kind: "chip", head: Number(chip.dataset.head), node: chip };
  const token = element.closest("text.bvl-token");
  if (token) return { kind: "token", side: token.dataset.side, index: Number(token.dataset.index), node: token };
  if (element.tagName === "line") {
    const row = element.parentNode, head = row && row.parentNode;
    if (row && head && row.dataset && head.dataset) {
      return { kind: "line", query: Number(row.dataset.q), head: Number(head.dataset.head), node: element };
    }
  }
  return null;
}

function render({ model, el }) {
  keepKeysInPanel(el);
  const root = document.createElement("div");
  root.className = "bvl-view bvl-head-view";
  el.appendChild(root);
  let figure = null;
  let refocus = null; // after a redraw, the chip or token the keyboard was on gets the focus back
  let asked = null; // the query and window the arrow keys asked for, until the kernel draws them

  function activate(target) {
    const what = action(target, model.get("heads"));
    if (!what) return;
    if (what.toggle !== undefined) {
      model.set("heads", toggledHeads(model.get("heads"), what.toggle));
      model.save_changes();
    } else if (what.open) {
      model.send({ type: "open", query: what.open.query, head: what.open.head });
    }
  }

  function highlight(target) {
    if (!figure) return;
    for (const lit of figure.querySelectorAll(".bvl-lit")) lit.classList.remove("bvl-lit");
    figure.classList.toggle("bvl-hovering", Boolean(target));
    if (!target) return;
    target.node.classList.add("bvl-lit");
    for (const line of figure.querySelectorAll(linesOf(target.side, target.index))) line.classList.add("bvl-lit");
  }

  let draws = 0;
  function draw() {
    figure = showFigure(root, model.get("svg"));
    draws += 1;
    root.dataset.draws = draws;
    if (!figure) return;
    const title = figure.querySelector(".bvl-title");
    Object.assign(root.dataset, { title: title ? title.textContent : "", query: figure.dataset.query || "-1",
      first: figure.dataset.first || "0" });
    figure.setAttribute("aria-label", "head view: the arrow keys on a query token select the query above or below");
    for (const chip of figure.querySelectorAll("g.bvl-head-chip")) {
      chip.setAttribute("tabindex", "0");
      chip.setAttribute("role", "button");
      chip.setAttribute("aria-pressed", chip.dataset.on === "true" ? "true" : "false");
      chip.setAttribute("aria-label", `head ${chip.dataset.head}: show or hide (double click: this head alone)`);
    }
    for (const token of figure.querySelectorAll("text.bvl-token")) {
      token.setAttribute("tabindex", "0");
      if (token.dataset.side !== "query") continue;
      token.setAttribute("role", "button");
      const title = token.querySelector("title") || svgEl(token, "title", {}, "");
      title.textContent = (title.textContent ? title.textContent + " · " : "") + "click: open the neuron view";
    }
    if (asked) { // keys pressed faster than the kernel draws: the focus stays on the query asked for, or the drawn one
      const drawn = Number(figure.dataset.query);
      const token = (index) => figure.querySelector(`text.bvl-token[data-side="query"][data-index="${index}"]`);
      const again = token(asked.query) || token(drawn);
      if (again) again.focus();
      if (drawn === asked.query) asked = null;
    } else if (refocus) {
      const again = figure.querySelector(refocus);
      if (again) again.focus();
      refocus = null;
    }
  }

  root.addEventListener("click", (event) => activate(targetOf(event.target)));
  root.addEventListener("dblclick", (event) => {
    const target = targetOf(event.target);
    if (target && target.kind === "chip") {
      model.set("heads", [target.head]);
      model.save_changes();
    }
  });
  function move(query, first) {
    model.set("query", query);
    model.set("first", first);
    model.save_changes();
  }

  root.addEventListener("keydown", (event) => {
    const target = targetOf(event.target);
    if (figure && target && target.kind === "token" && target.side === "query") {
      const count = Number(figure.dataset.queries), rows = Number(figure.dataset.rows);
      const from = asked || { query: Number(figure.dataset.query), first: Number(figure.dataset.first) };
      const query = nextQuery(from.query, event.key, count, rows, from.first);
      if (query !== null) {
        event.preventDefault(); // the arrows move the query, not the page
        asked = { query, first: windowFirst(query, from.first, count, rows) };
        move(asked.query, asked.first);
        return;
      }
    }
    if (event.key !== "Enter" && event.key !== " ") return;
    if (!target || target.kind === "line") return;
    event.preventDefault();
    if (target.kind === "chip") refocus = `g.bvl-head-chip[data-head="${target.head}"]`;
    activate(target);
  });
  const hover = (event) => {
    const target = targetOf(event.target);
    highlight(target && target.kind === "token" ? target : null);
  };
  root.addEventListener("mouseover", hover);
  root.addEventListener("focusin", hover);
  root.addEventListener("mouseleave", () => highlight(null));
  let wheelFirst = null; // the window asked for by the wheel and not drawn yet, so quick turns add up
  root.addEventListener("wheel", (event) => {
    if (!figure || !event.deltaY) return;
    const count = Number(figure.dataset.queries), rows = Number(figure.dataset.rows);
    if (count <= rows) return; // the whole text is drawn: the page scrolls
    const from = wheelFirst === null ? Number(figure.dataset.first) : wheelFirst;
    const first = wheeledFirst(from, event.deltaY, count, rows);
    event.preventDefault();
    if (first === from) return;
    wheelFirst = first;
    model.set("first", first);
    model.save_changes();
  }, { passive: false });
  root.addEventListener("focusout", () => highlight(null));

  const schedule = redrawScheduler(() => { wheelFirst = null; draw(); });
  model.on("change:svg", schedule);
  draw();
  return () => model.off("change:svg", schedule);
}

export default { render };
