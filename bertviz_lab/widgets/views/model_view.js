import { showFigure, tooltip, redrawScheduler } from "./shared.js";
// The model view. The kernel draws the figure (figures/model_view.py: every layer × head as a thumbnail under one
// colour scale, heads switched off veiled and crossed, a badge per head saying how far its attention moved, lines
// saying what the predictions did); this module shows it and adds what a pointer and a keyboard do:
// - a thumbnail (g.bvl-thumb[data-layer][data-head]) clicked, or Enter/Space on it, opens that head as the heatmap
//   (`selected`); in "ablate" click mode, or with shift held, it switches the head off or on again (`ablated`), and
//   the kernel runs the text again and draws what changed;
// - hovering (or focusing) a thumbnail shows its head, whether it is off, how far its attention moved and what a click
//   does, from the figure's data attributes (no kernel round trip).
// Data attributes for this and for tests: the figure's root carries data-ablated ("0:3,1:7") and data-badges (how
// many badges are drawn); each thumbnail data-layer, data-head, data-off and data-change; the view element
// (div.bvl-model-view) data-click-mode. No text is ever set here but the hover box's, with textContent.

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

// The hover text of a thumbnail: its head, whether it is off, how far its attention moved, what a click does.
// `thumb` holds the thumbnail's data attributes as strings (layer, head, off, change); `hint` how to read a map.
export function thumbTip(thumb, clickMode, hint) {
  const off = thumb.off === "true";
  const lines = [`layer ${thumb.layer}, head ${thumb.head}` + (off ? " (switched off)" : "")];
  if (thumb.change !== undefined && !off) lines.push(`attention moved by ${Number(thumb.change).toFixed(3)}`);
  if (hint) lines.push(hint);
  const toggle = "switch it " + (off ? "on again" : "off");
  lines.push(clickMode === "ablate" ? "click: " + toggle : "click: open it as the heatmap · shift-click: " + toggle);
  return lines.join("\n");
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "bvl-view bvl-model-view";
  const holder = document.createElement("div");
  const tip = tooltip();
  root.append(holder, tip);
  el.appendChild(root);
  let figure = null;

  function thumbOf(node) {
    return node && node.closest ? node.closest("g.bvl-thumb") : null;
  }

  function activate(thumb, shiftKey) {
    const layer = Number(thumb.dataset.layer), head = Number(thumb.dataset.head);
    if (clickAction(model.get("click_mode"), shiftKey) === "toggle") {
      model.set("ablated", toggleAblated(model.get("ablated") || [], layer, head));
    } else {
      model.set("selected", [layer, head]);
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

  function focusedThumb() {
    const thumb = thumbOf(holder.contains(document.activeElement) ? document.activeElement : null);
    return thumb && `g.bvl-thumb[data-layer="${thumb.dataset.layer}"][data-head="${thumb.dataset.head}"]`;
  }

  function draw() {
    const refocus = focusedThumb(); // a redraw (a click's answer from the kernel) keeps the keyboard's place
    figure = showFigure(holder, model.get("svg"));
    tip.style.display = "none";
    if (!figure) return;
    for (const thumb of figure.querySelectorAll("g.bvl-thumb")) {
      thumb.setAttribute("tabindex", "0");
      thumb.setAttribute("role", "button");
      thumb.setAttribute("aria-label", `layer ${thumb.dataset.layer}, head ${thumb.dataset.head}` +
        (thumb.dataset.off === "true" ? " (switched off)" : ""));
    }
    const again = refocus && figure.querySelector(refocus);
    if (again) again.focus();
  }

  holder.addEventListener("click", (event) => {
    const thumb = thumbOf(event.target);
    if (thumb) activate(thumb, event.shiftKey);
  });
  holder.addEventListener("keydown", (event) => {
    const thumb = thumbOf(event.target);
    if (!thumb || (event.key !== "Enter" && event.key !== " ")) return;
    event.preventDefault();
    activate(thumb, event.shiftKey);
  });
  holder.addEventListener("mouseover", (event) => showTip(thumbOf(event.target)));
  holder.addEventListener("focusin", (event) => showTip(thumbOf(event.target)));
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
