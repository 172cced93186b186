import { showFigure, stepIndex, tooltip, typed, redrawScheduler, keepKeysInPanel } from "./shared.js";

// The saliency view: shows the kernel's drawing (figures/saliency.py, the same SVG the static copy and exports hold)
// and adds what needs no kernel: hover over a token box, or focus on it, shows the whole token, its position and its
// exact score from the float32 `scores` buffer the view holds. The tokens are one tab stop: the arrow keys, Home and
// End move the focus between them. While a run is under way the drawing says "computing …" over the previous tokens,
// dimmed, and a progress line above it says how many of the run's steps are done ("Integrated gradients: 12/64
// steps", from the synced progress_* traits the kernel updates as the run goes).
//
// What it reads from the drawing (data- attributes the figure writes):
//   svg.bvl-saliency   data-status (ready | computing | error), data-title, data-subtitle, data-tokens
//   g.bvl-token        data-index (its place among the tokens), data-position (its position in the input)
// Token text is only ever set with textContent.

// A score as hover shows it: seven significant digits, as Python's "{:.7g}" (figures.saliency.score_text).
export function scoreText(value) {
  if (value === 0) return "0";
  if (!Number.isFinite(value)) return String(value);
  const exponent = Math.floor(Math.log10(Math.abs(value)));
  if (exponent < -4 || exponent >= 7) {
    const [mantissa, power] = value.toExponential(6).split("e");
    const trimmed = mantissa.includes(".") ? mantissa.replace(/0+$/, "").replace(/\.$/, "") : mantissa;
    const sign = power[0] === "-" ? "-" : "+";
    const digits = power.replace(/^[+-]/, "").padStart(2, "0");
    return `${trimmed}e${sign}${digits}`;
  }
  const fixed = value.toFixed(Math.max(0, 6 - exponent));
  return fixed.includes(".") ? fixed.replace(/0+$/, "").replace(/\.$/, "") : fixed;
}

// The hover text of a token: its position, the whole token, its exact score.
export function tokenTip(position, token, score) {
  return `${position} · ${token}\nscore ${scoreText(score)}`;
}

// The progress line of a run under way, or "" where there is none to show.
export function progressText(label, done, total) {
  if (!(total > 0)) return "";
  return `${label}: ${Math.min(done, total)}/${total} steps`;
}

// The token a key moves the focus to from `current` among `count`, or null for a key that does not move it.
export function nextToken(current, key, count) {
  return stepIndex(current, key, count);
}

function render({ model, el }) {
  keepKeysInPanel(el);
  const outer = document.createElement("div");
  outer.className = "bvl-saliency-view bvl-view";
  const holder = document.createElement("div");
  const tip = tooltip();
  tip.setAttribute("aria-live", "polite"); // a focused token's score is read out
  const progress = document.createElement("div");
  progress.className = "bvl-saliency-progress";
  progress.setAttribute("role", "status");
  const bar = document.createElement("progress");
  const said = document.createElement("span");
  progress.append(bar, said);
  outer.append(progress, holder, tip);
  el.appendChild(outer);
  let boxes = [], tokens = [], scores = new Float32Array(0);

  function hide() {
    tip.style.display = "none";
  }

  function show(box) {
    const i = Number(box.getAttribute("data-index"));
    if (!(i >= 0 && i < tokens.length)) return;
    tip.textContent = tokenTip(box.getAttribute("data-position"), tokens[i], scores[i]);
    tip.style.display = "block";
    const area = outer.getBoundingClientRect(), rect = box.getBoundingClientRect();
    const left = rect.right - area.left + outer.scrollLeft + 8;
    const fits = left + tip.offsetWidth < outer.clientWidth + outer.scrollLeft;
    tip.style.left = (fits ? left : Math.max(0, rect.left - area.left + outer.scrollLeft - 8 - tip.offsetWidth)) + "px";
    tip.style.top = rect.bottom - area.top + outer.scrollTop + 4 + "px";
  }

  function draw() {
    hide();
    const focused = holder.contains(document.activeElement) ? document.activeElement.getAttribute("data-index") : null;
    const figure = showFigure(holder, model.get("svg"));
    tokens = model.get("tokens");
    scores = typed(model.get("scores"), Float32Array);
    boxes = figure ? [...figure.querySelectorAll("g.bvl-token[data-index]")] : [];
    boxes.forEach((box, i) => {
      box.setAttribute("tabindex", i === 0 ? "0" : "-1");
      box.setAttribute("role", "img");
      box.setAttribute("aria-label", `${box.getAttribute("data-position")} · ${tokens[i]}`);
    });
    if (focused !== null && boxes[Number(focused)]) boxes[Number(focused)].focus();
    drawProgress(figure);
  }

  function drawProgress(figure = holder.querySelector("svg")) {
    const busy = Boolean(figure) && figure.getAttribute("data-status") === "computing";
    const total = model.get("progress_total"), done = model.get("progress_done");
    const text = busy ? progressText(model.get("progress_label"), done, total) : "";
    outer.classList.toggle("bvl-busy", busy);
    progress.style.display = text ? "" : "none";
    bar.max = Math.max(1, total);
    bar.value = Math.min(done, total);
    said.textContent = text;
  }

  function target(event) {
    const box = event.target.closest && event.target.closest("g.bvl-token[data-index]");
    return box && holder.contains(box) ? box : null;
  }

  holder.addEventListener("mouseover", (event) => {
    const box = target(event);
    if (box) show(box);
    else hide();
  });
  holder.addEventListener("mouseleave", hide);
  holder.addEventListener("focusin", (event) => {
    const box = target(event);
    if (box) show(box);
  });
  holder.addEventListener("focusout", hide);
  holder.addEventListener("keydown", (event) => {
    const box = target(event);
    if (!box) return;
    const next = nextToken(Number(box.getAttribute("data-index")), event.key, boxes.length);
    if (next === null) return;
    event.preventDefault();
    box.setAttribute("tabindex", "-1");
    boxes[next].setAttribute("tabindex", "0");
    boxes[next].focus();
  });
  const schedule = redrawScheduler(draw);
  const scheduleProgress = redrawScheduler(() => drawProgress());
  const progressTraits = ["change:progress_done", "change:progress_total", "change:progress_label"];
  model.on("change:svg", schedule);
  for (const name of progressTraits) model.on(name, scheduleProgress);
  draw();
  return () => {
    model.off("change:svg", schedule);
    for (const name of progressTraits) model.off(name, scheduleProgress);
  };
}

export default { render };
