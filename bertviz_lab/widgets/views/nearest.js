import { showFigure, followDrawing, viewFrame, tipBeside, rowKey, keepKeysInPanel } from "./shared.js";
// Nearest contexts. The kernel draws the whole figure (figures/nearest.py: one SVG document, the one the static copy
// and exports hold); this module shows it and adds what needs no kernel: hover over a match, or focus on it, shows
// its text id, position, score and its whole context (the drawing cuts long contexts) from the lists the view holds.
// Every match is a tab stop (the arrow keys, Home and End move between them too); a click or Enter opens the match's
// text in the attention panel at that token (a message to the kernel: {type: "open", index}), and the kernel marks
// the match opened (`selected`). Text is only ever set with textContent.
//
// The view's element (div.bvl-nearest-view) says what it shows, for tools and tests: data-title, data-matches,
// data-selected (the row opened, or -1), data-draws; while a match is read, data-match (its row).

// A cosine similarity as hover writes it: four decimals, as Python's "{:.4f}" (figures.nearest.score_text).
export function scoreText(score) {
  return Number.isFinite(score) ? score.toFixed(4) : String(score);
}

// What the tooltip says about one match: text id, position and score, then the token in its whole context.
export function matchTip(textId, position, score, left, token, right) {
  const context = [left, `[${token}]`, right].filter((part) => part !== "").join(" ");
  return `#${textId} · position ${position} · score ${scoreText(score)}\n${context}`;
}

function render({ model, el }) {
  keepKeysInPanel(el);
  const { outer, holder, tip } = viewFrame(el, "bvl-corpus-view bvl-nearest-view bvl-view");
  let rows = [], draws = 0;

  function hide() {
    tip.style.display = "none";
    for (const row of rows) row.classList.remove("bvl-lit");
    delete outer.dataset.match;
  }

  function read(row) {
    hide();
    const i = Number(row.dataset.index);
    row.classList.add("bvl-lit");
    tip.textContent = matchTip(model.get("text_ids")[i], model.get("positions")[i], model.get("scores")[i],
      model.get("lefts")[i], model.get("tokens")[i], model.get("rights")[i]);
    tipBeside(tip, outer, row);
    outer.dataset.match = i;
  }

  function open(row) {
    model.send({ type: "open", index: Number(row.dataset.index) });
  }

  function draw() {
    const focused = holder.contains(document.activeElement) ? document.activeElement.dataset.index : undefined;
    hide();
    const figure = showFigure(holder, model.get("svg"));
    rows = figure ? [...figure.querySelectorAll("g.bvl-match")] : [];
    const tokens = model.get("tokens");
    rows.forEach((row, i) => {
      row.setAttribute("tabindex", "0");
      row.setAttribute("role", "button");
      row.setAttribute("aria-label", `open text #${row.dataset.textId} at token ${tokens[i]} in the attention panel`);
    });
    if (focused !== undefined && rows[Number(focused)]) rows[Number(focused)].focus();
    draws += 1;
    Object.assign(outer.dataset, { title: model.get("title"), matches: rows.length,
      selected: model.get("selected"), draws });
  }

  const rowOf = (node) => {
    const row = node.closest ? node.closest("g.bvl-match") : null;
    return row && holder.contains(row) ? row : null;
  };
  holder.addEventListener("mouseover", (event) => {
    const row = rowOf(event.target);
    if (row) read(row);
    else hide();
  });
  holder.addEventListener("mouseleave", hide);
  holder.addEventListener("click", (event) => {
    const row = rowOf(event.target);
    if (row) open(row);
  });
  holder.addEventListener("focusin", (event) => {
    const row = rowOf(event.target);
    if (row) read(row);
  });
  holder.addEventListener("focusout", hide);
  holder.addEventListener("keydown", (event) => {
    const row = rowOf(event.target);
    if (row) rowKey(event, rows, row, open);
  });
  return followDrawing(model, draw);
}

export default { render };
