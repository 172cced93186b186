import { showFigure, stepIndex, tooltip, typed, redrawScheduler } from "./shared.js";

// The saliency view: shows the kernel's drawing (figures/saliency.py, the same SVG the static copy and exports hold)
// and adds what needs no kernel: hover over a token box, or focus on it, shows the whole token, its position and its
// exact score from the float32 `scores` buffer the view holds. The tokens are one tab stop: the arrow keys, Home and
// End move the focus between them.
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

// The token a key moves the focus to from `current` among `count`, or null for a key that does not move it.
export function nextToken(current, key, count) {
  return stepIndex(current, key, count);
}

function render({ model, el }) {
  const outer = document.createElement("div");
  outer.className = "bvl-saliency-view bvl-view";
  const holder = document.createElement("div");
  const tip = tooltip();
  tip.setAttribute("aria-live", "polite"); // a focused token's score is read out
  outer.append(holder, tip);
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
  model.on("change:svg", schedule);
  draw();
  return () => model.off("change:svg", schedule);
}

export default { render };
