import { showFigure, typed, followDrawing, viewFrame, svgEl, keepKeysInPanel } from "./shared.js";
// The query–key map. The kernel draws the whole figure (figures/qk_map.py: one SVG document, the one the static copy
// and exports hold); this module shows it and adds what needs no kernel: the pointer over the plot reads the nearest
// point (within HIT_PX), from the float32 coordinates, kinds, tokens and contexts the view holds: whether it is a query
// or a key, its token in its context, its text and position. A click opens that point's text in the attention panel
// (a message to the kernel: {type: "open", index}); the kernel rings the point opened (`selected`). The points are
// one tab stop: the arrow keys move to the nearest point in that direction, Enter opens it. Text is only ever set
// with textContent.
//
// The plot's frame (rect.bvl-plot) gives its pixel box (x, y, width, height) and the data ranges it spans (data-x0,
// data-x1, data-y0, data-y1). The view's element (div.bvl-qk-map-view) says what it shows, for tools and tests:
// data-title, data-points, data-selected, data-draws; while a point is read, data-point (its index).

export const HIT_PX = 8; // a point is read within this many pixels of the pointer

// The pixel position of every point in the plot's frame {x, y, width, height, x0, x1, y0, y1} (y grows downwards).
export function pixelPoints(xs, ys, frame) {
  const px = new Float32Array(xs.length), py = new Float32Array(ys.length);
  for (let i = 0; i < xs.length; i++) {
    px[i] = frame.x + ((xs[i] - frame.x0) / (frame.x1 - frame.x0)) * frame.width;
    py[i] = frame.y + frame.height - ((ys[i] - frame.y0) / (frame.y1 - frame.y0)) * frame.height;
  }
  return { px, py };
}

// The index of the point nearest to (x, y) within `radius` pixels, or -1.
export function nearestPoint(px, py, x, y, radius = HIT_PX) {
  let best = -1, bestDistance = radius * radius;
  for (let i = 0; i < px.length; i++) {
    const distance = (px[i] - x) ** 2 + (py[i] - y) ** 2;
    if (distance <= bestDistance) { best = i; bestDistance = distance; }
  }
  return best;
}

const DIRECTIONS = { ArrowRight: [1, 0], ArrowLeft: [-1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };

// The point an arrow key moves to from `current`: the nearest one lying more in that direction than across it
// (current where there is none); 0 from no point; null for any other key.
export function stepPoint(px, py, current, key) {
  const direction = DIRECTIONS[key];
  if (!direction || !px.length) return null;
  if (current < 0 || current >= px.length) return 0;
  let best = current, bestDistance = Infinity;
  for (let i = 0; i < px.length; i++) {
    const dx = px[i] - px[current], dy = py[i] - py[current];
    const along = dx * direction[0] + dy * direction[1], across = Math.abs(dx * direction[1] - dy * direction[0]);
    if (i === current || along <= 0 || across > along) continue;
    const distance = dx * dx + dy * dy;
    if (distance < bestDistance) { best = i; bestDistance = distance; }
  }
  return best;
}

// What the tooltip says about one point: query or key, its token, the token in its context, where it comes from.
export function pointTip(isKey, token, context, textId, position) {
  return `${isKey ? "key" : "query"} · ${token}\n${context}\ntext #${textId} · position ${position}`;
}

// The plot's frame as the drawing describes it.
export function plotFrame(rect) {
  const number = (name) => Number(rect.getAttribute(name));
  return { x: number("x"), y: number("y"), width: number("width"), height: number("height"),
    x0: Number(rect.dataset.x0), x1: Number(rect.dataset.x1), y0: Number(rect.dataset.y0),
    y1: Number(rect.dataset.y1) };
}

function render({ model, el }) {
  keepKeysInPanel(el);
  const { outer, holder, tip } = viewFrame(el, "bvl-corpus-view bvl-qk-map-view bvl-view");
  let current = null, point = -1, draws = 0;

  function hide() {
    tip.style.display = "none";
    if (current) current.mark.setAttribute("visibility", "hidden");
    delete outer.dataset.point;
  }

  function read(index) {
    if (!current || index < 0 || index >= current.px.length) { hide(); return; }
    point = index;
    const x = current.px[index], y = current.py[index];
    tip.textContent = pointTip(current.isKey[index] === 1, model.get("tokens")[index],
      model.get("contexts")[current.contextIndex[index]], current.textIds[index], current.positions[index]);
    current.mark.setAttribute("cx", x);
    current.mark.setAttribute("cy", y);
    current.mark.setAttribute("visibility", "visible");
    tip.style.display = "block";
    const frame = outer.getBoundingClientRect(), box = current.svg.getBoundingClientRect();
    const k = box.width / current.width || 1;
    const right = x < current.frame.x + current.frame.width / 2;
    const left = box.left - frame.left + outer.scrollLeft + k * x;
    tip.style.left = (right ? left + 12 : Math.max(0, left - 12 - tip.offsetWidth)) + "px";
    tip.style.top = box.top - frame.top + outer.scrollTop + k * y + 12 + "px";
    outer.dataset.point = index;
  }

  function open(index) {
    if (index >= 0) model.send({ type: "open", index });
  }

  function draw() {
    const focused = Boolean(current) && current.points === document.activeElement;
    hide();
    const svg = showFigure(holder, model.get("svg"));
    const rect = svg && svg.querySelector("rect.bvl-plot");
    const points = svg && svg.querySelector("g.bvl-points");
    current = null;
    if (rect && points) {
      const frame = plotFrame(rect);
      const { px, py } = pixelPoints(typed(model.get("xs"), Float32Array), typed(model.get("ys"), Float32Array), frame);
      const mark = svgEl(svg, "circle", { class: "bvl-corpus-mark bvl-heatmap-mark-line", r: 6,
        visibility: "hidden" });
      points.setAttribute("tabindex", "0");
      points.setAttribute("role", "img");
      points.setAttribute("aria-label", "queries and keys: the arrow keys move from point to point, Enter opens " +
        "the point's text");
      current = { svg, frame, px, py, mark, points, width: Number(svg.getAttribute("width")),
        isKey: typed(model.get("is_key"), Uint8Array), textIds: typed(model.get("text_ids"), Int32Array),
        positions: typed(model.get("positions"), Int32Array),
        contextIndex: typed(model.get("context_index"), Int32Array) };
      if (focused) {
        points.focus();
        read(point);
      }
    }
    draws += 1;
    Object.assign(outer.dataset, { title: model.get("title"), points: current ? current.px.length : 0,
      selected: model.get("selected"), draws });
  }

  function under(event) {
    if (!current) return -1;
    const box = current.svg.getBoundingClientRect();
    const k = current.width / box.width || 1;
    return nearestPoint(current.px, current.py, (event.clientX - box.left) * k, (event.clientY - box.top) * k);
  }

  holder.addEventListener("mousemove", (event) => {
    const index = under(event);
    if (index < 0) hide();
    else if (index !== Number(outer.dataset.point)) read(index);
  });
  holder.addEventListener("mouseleave", hide);
  holder.addEventListener("click", (event) => open(under(event)));
  holder.addEventListener("focusin", (event) => {
    if (current && event.target === current.points) read(point >= 0 ? point : 0);
  });
  holder.addEventListener("focusout", hide);
  holder.addEventListener("keydown", (event) => {
    if (!current || event.target !== current.points) return;
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      open(point);
      return;
    }
    const next = stepPoint(current.px, current.py, point, event.key);
    if (next === null) return;
    event.preventDefault();
    read(next);
  });
  return followDrawing(model, draw);
}

export default { render };
