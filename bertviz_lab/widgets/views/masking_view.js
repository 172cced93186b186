import { showFigure, followDrawing, stepIndex, keepKeysInPanel } from "./shared.js";
// The masking preview. The kernel draws the figure (figures/masking.py: a chip per token, coloured and marked by its
// fate) and this module shows it and makes the chips that a click masks (g.bvl-chip[data-toggle][data-position])
// buttons: a click, or Space/Enter on the focused chip, masks or unmasks that token by writing the toggled position
// list to the synced `chosen`; the kernel masks those tokens and draws again. The chips are one tab stop: the arrow
// keys, Home and End move between them. Each chip says what it is (aria-label) and whether it is masked
// (aria-pressed). The figure is parsed as XML (showFigure); this module sets attributes only, never text or HTML.

// The masked positions after a click on `position`: toggled, ascending.
export function toggled(chosen, position) {
  if (!Number.isInteger(position) || position < 0) {
    throw new RangeError(`position must be a whole number >= 0, got ${position}`);
  }
  const next = chosen.includes(position) ? chosen.filter((p) => p !== position) : [...chosen, position];
  return next.sort((a, b) => a - b);
}

// What a screen reader says for a chip: its token, its position, and what Space does to it.
export function chipLabel(token, position, masked) {
  const state = masked ? "masked; Space unmasks it" : "not masked; Space masks it";
  return `token ${token} at position ${position}: ${state}`;
}

// The chip the keyboard is on after a redraw: the one at `position` if it is still a button, else the first.
export function activePosition(positions, position) {
  if (!positions.length) return null;
  return positions.includes(position) ? position : positions[0];
}

// The chip position the arrow keys, Home or End move to from `position` among the chip `positions` (in drawing
// order); null for a key that does not move.
export function movedPosition(positions, position, key) {
  const next = stepIndex(positions.indexOf(position), key, positions.length);
  return next === null ? null : positions[next];
}

function chipOf(node) {
  return node && node.closest ? node.closest("g.bvl-chip[data-toggle]") : null;
}

function render({ model, el }) {
  keepKeysInPanel(el);
  const root = document.createElement("div");
  root.className = "bvl-view bvl-figure-view bvl-masking-view";
  el.appendChild(root);
  let current = null; // the position of the chip the keyboard is on
  let refocus = false; // after a redraw, that chip gets the focus back
  let draws = 0;
  const buttons = () => [...root.querySelectorAll("g.bvl-chip[data-toggle]")];

  function toggle(chip) {
    current = Number(chip.dataset.position);
    refocus = true;
    model.set("chosen", toggled(model.get("chosen"), current));
    model.save_changes();
  }

  function draw() {
    const figure = showFigure(root, model.get("svg"));
    draws += 1;
    root.dataset.draws = draws;
    root.dataset.masked = figure ? figure.dataset.masked || "" : "";
    root.dataset.mode = figure ? figure.dataset.mode || "" : "";
    const chips = buttons();
    current = activePosition(chips.map((chip) => Number(chip.dataset.position)), current);
    for (const chip of chips) {
      const position = Number(chip.dataset.position);
      const masked = chip.classList.contains("bvl-mask");
      chip.setAttribute("tabindex", position === current ? "0" : "-1");
      chip.setAttribute("role", "button");
      chip.setAttribute("aria-pressed", masked ? "true" : "false");
      chip.setAttribute("aria-label", chipLabel(chip.dataset.token || "", position, masked));
      if (refocus && position === current) chip.focus();
    }
    refocus = false;
  }

  root.addEventListener("click", (event) => {
    const chip = chipOf(event.target);
    if (chip) toggle(chip);
  });
  root.addEventListener("keydown", (event) => {
    const chip = chipOf(event.target);
    if (!chip) return;
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      toggle(chip);
      return;
    }
    const chips = buttons();
    const positions = chips.map((button) => Number(button.dataset.position));
    const next = movedPosition(positions, Number(chip.dataset.position), event.key);
    if (next === null) return;
    event.preventDefault();
    const target = chips[positions.indexOf(next)];
    chip.setAttribute("tabindex", "-1");
    target.setAttribute("tabindex", "0");
    target.focus();
    current = next;
  });

  return followDrawing(model, draw);
}

export default { render };
