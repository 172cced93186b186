import { showFigure, tooltip, redrawScheduler, keepKeysInPanel } from "./shared.js";
// The model view. The kernel draws the figure (figures/model_view.py: every layer × head as a thumbnail under one
// colour scale, heads switched off veiled and crossed, a badge per head saying how far its attention moved, lines
// saying what the predictions did); this module shows it and adds what a pointer and a keyboard do:
// - a thumbnail (g.bvl-thumb[data-layer][data-head]) clicked opens that head as the heatmap (`selected`); in "ablate"
//   click mode, or with shift held, it switches the head off or on again (`ablated`), and the kernel runs the text
//   again and draws what changed;
// - the keyboard, whatever the click mode: the thumbnails are one tab stop (a roving tabindex); the arrow keys move
//   between heads (left/right) and layers (up/down), Home/End go to a layer's first/last head, PageUp/PageDown to the
//   first/last layer; Enter opens the focused head, Space (or Shift+Enter) switches it off or on, Escape switches
//   every head on again;
// - hovering (or focusing) a thumbnail shows its head, whether it is off, how far its attention moved and what a click
//   or key does, from the figure's data attributes (no kernel round trip). Each thumbnail is a toggle button to
//   assistive technology: its name says layer, head and state, aria-pressed says whether it is switched off.
// Data attributes for this and for tests: the figure's root carries data-ablated ("0:3,1:7") and data-badges (how
// many badges are drawn); each thumbnail data-layer, data-head, data-off and data-change; the view element
// (div.bvl-model-view) data-click-mode and data-cursor ("layer:head", the keyboard's thumbnail). No text is ever set
// here but the hover box's, with textContent.

// What a click on a thumbnail does: "toggle" (switch the head off or on) or "open" (show it as the heatmap).
export function clickAction(clickMode, shiftKey) {
  return clickMode === "ablate" || shiftKey ? "toggle" : "open";
}

// The heads switched off after `layer`, `head` is toggled: [[layer, head], ...] sorted by layer, then head.
export function toggleAblated(ablated, layer, head) {
  const isOff = ablated.some(([l, h]) => l === layer && h === head);
  const next = isOff ? ablated.filter(([l, h]) => l !== layer || h !== head) : [...ablated, [layer, head]];
  return next.map(([l, h]) => [l, h]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}

// What a key on a focused thumbnail does: "open", "toggle", "reset", or null for a key it leaves alone.
export function keyAction(key, shiftKey) {
  if (key === "Enter") return shiftKey ? "toggle" : "open";
  if (key === " " || key === "Spacebar") return "toggle";
  if (key === "Escape") return "reset";
  return null;
}

// The thumbnail [layer, head] a key moves the keyboard to from [layer, head] in a grid of `layers` × `heads`, or null
// for a key that does not move: arrows step one head or layer (stopping at the edges), Home/End a layer's first/last
// head, PageUp/PageDown the first/last layer.
export function nextThumb([layer, head], key, layers, heads) {
  if (!layers || !heads) return null;
  const clamp = (value, count) => Math.max(0, Math.min(count - 1, value));
  const moves = {
    ArrowLeft: [layer, head - 1], ArrowRight: [layer, head + 1],
    ArrowUp: [layer - 1, head], ArrowDown: [layer + 1, head],
    Home: [layer, 0], End: [layer, heads - 1], PageUp: [0, head], PageDown: [layers - 1, head],
  };
  const to = moves[key];
  return to ? [clamp(to[0], layers), clamp(to[1], heads)] : null;
}

// A thumbnail's accessible name: its layer and head, and whether it is switched off.
export function thumbLabel(thumb) {
  return `layer ${thumb.layer}, head ${thumb.head}, ` + (thumb.off === "true" ? "switched off" : "on");
}

// The hover text of a thumbnail: its head, whether it is off, how far its attention moved, what a click or key does.
// `thumb` holds the thumbnail's data attributes as strings (layer, head, off, change); `hint` how to read a map.
export function thumbTip(thumb, clickMode, hint) {
  const off = thumb.off === "true";
  const lines = [`layer ${thumb.layer}, head ${thumb.head}` + (off ? " (switched off)" : "")];
  if (thumb.change !== undefined && !off) lines.push(`attention moved by ${Number(thumb.change).toFixed(3)}`);
  if (hint) lines.push(hint);
  const toggle = "switch it " + (off ? "on again" : "off");
  lines.push(clickMode === "ablate" ? "click: " + toggle : "click: open it as the heatmap · shift-click: " + toggle);
  lines.push(`keys: Enter open · Space ${toggle} · Esc all heads on · arrows move`);
  return lines.join("\n");
}

function render({ model, el }) {
  keepKeysInPanel(el);
  const root = document.createElement("div");
  root.className = "bvl-view bvl-model-view";
  const holder = document.createElement("div");
  const tip = tooltip();
  root.append(holder, tip);
  el.appendChild(root);
  let figure = null;
  let cursor = null; // [layer, head]: the thumbnail that holds the tab stop

  function thumbOf(node) {
    return node && node.closest ? node.closest("g.bvl-thumb") : null;
  }

  function thumbAt([layer, head]) {
    return figure && figure.querySelector(`g.bvl-thumb[data-layer="${layer}"][data-head="${head}"]`);
  }

  function act(action, thumb) {
    const layer = Number(thumb.dataset.layer), head = Number(thumb.dataset.head);
    if (action === "toggle") {
      model.set("ablated", toggleAblated(model.get("ablated") || [], layer, head));
    } else if (action === "reset") {
      if (!(model.get("ablated") || []).length) return;
      model.set("ablated", []);
    } else {
      const [row, column] = model.get("selected") || [];
      if (row === layer && column === head) model.set("opens", (model.get("opens") || 0) + 1); // the same one again
      else model.set("selected", [layer, head]);
    }
    model.save_changes();
  }

  function showTip(thumb) {
    if (!thumb) {
      tip.style.display = "none";
      return;
    }
    const note = figure && figure.querySelector("text.bvl-note");
    tip.textContent = thumbTip({ ...thumb.dataset }, model.get("click_mode"), note ? note.textContent : "");
    const box = thumb.getBoundingClientRect(), outer = root.getBoundingClientRect();
    tip.style.left = box.right - outer.left + root.scrollLeft + 8 + "px";
    tip.style.top = box.top - outer.top + root.scrollTop + "px";
    tip.style.display = "block";
  }

  function showMode() {
    root.dataset.clickMode = model.get("click_mode");
    root.classList.toggle("bvl-ablate-mode", model.get("click_mode") === "ablate");
  }

  // the tab stop moves to `to` ([layer, head]); the thumbnail there is returned (null where there is none)
  function moveCursor(to) {
    const thumb = thumbAt(to);
    if (!thumb) return null;
    const before = cursor && thumbAt(cursor);
    if (before && before !== thumb) before.setAttribute("tabindex", "-1");
    thumb.setAttribute("tabindex", "0");
    cursor = to;
    root.dataset.cursor = to.join(":");
    return thumb;
  }

  function draw() {
    const refocus = holder.contains(document.activeElement); // a redraw (a key's answer) keeps the keyboard's place
    figure = showFigure(holder, model.get("svg"));
    tip.style.display = "none";
    if (!figure || !figure.querySelector("g.bvl-thumb")) return;
    figure.setAttribute("role", "group");
    figure.setAttribute("aria-label", "heads: arrow keys move, Enter opens a head, Space switches it off or on, " +
      "Escape switches every head on");
    for (const thumb of figure.querySelectorAll("g.bvl-thumb")) {
      thumb.setAttribute("tabindex", "-1");
      thumb.setAttribute("role", "button");
      thumb.setAttribute("aria-pressed", thumb.dataset.off === "true" ? "true" : "false");
      thumb.setAttribute("aria-label", thumbLabel(thumb.dataset));
    }
    const selected = model.get("selected") || [0, 0];
    const start = [cursor, selected, [0, 0]].find((place) => place && thumbAt(place));
    const thumb = moveCursor(start);
    if (refocus && thumb) thumb.focus();
  }

  holder.addEventListener("click", (event) => {
    const thumb = thumbOf(event.target);
    if (!thumb) return;
    moveCursor([Number(thumb.dataset.layer), Number(thumb.dataset.head)]);
    act(clickAction(model.get("click_mode"), event.shiftKey) === "toggle" ? "toggle" : "open", thumb);
  });
  holder.addEventListener("keydown", (event) => {
    const thumb = thumbOf(event.target);
    if (!thumb || event.altKey || event.ctrlKey || event.metaKey) return;
    const figureData = figure.dataset;
    const to = nextThumb([Number(thumb.dataset.layer), Number(thumb.dataset.head)], event.key,
      Number(figureData.layers), Number(figureData.heads));
    const action = to ? null : keyAction(event.key, event.shiftKey);
    if (!to && !action) return;
    event.preventDefault();
    event.stopPropagation(); // the notebook's own keys (Enter edits a cell, arrows move between cells) stay out
    if (to) {
      const next = moveCursor(to);
      if (next) next.focus();
    } else {
      act(action, thumb);
    }
  });
  holder.addEventListener("mouseover", (event) => showTip(thumbOf(event.target)));
  holder.addEventListener("focusin", (event) => {
    const thumb = thumbOf(event.target);
    if (thumb) moveCursor([Number(thumb.dataset.layer), Number(thumb.dataset.head)]);
    showTip(thumb);
  });
  holder.addEventListener("mouseleave", () => showTip(null));
  holder.addEventListener("focusout", () => showTip(null));

  const schedule = redrawScheduler(draw);
  model.on("change:svg", schedule);
  model.on("change:click_mode", showMode);
  showMode();
  draw();
  return () => {
    model.off("change:svg", schedule);
    model.off("change:click_mode", showMode);
  };
}

export default { render };
