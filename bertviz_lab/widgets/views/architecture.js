import { showFigure } from "./shared.js";
// The architecture diagram: the panel's figure (the `svg` trait, the same document the static copy and exports hold)
// fit to the panel's width with readable text, zoom buttons, ctrl+wheel zoom and drag-to-pan. Drawn from the synced
// figure and zoom alone, so a reload or a second tab shows the same view; the page's theme styles it (figure.css,
// architecture.css).

export const MIN_ZOOM = 0.1, MAX_ZOOM = 8;

// The (width, height) of an SVG document's viewBox, or [800, 600] when it has none.
export function viewBoxSize(svg) {
  const found = /viewBox="\s*[-\d.]+[\s,]+[-\d.]+[\s,]+([\d.]+)[\s,]+([\d.]+)\s*"/.exec(svg || "");
  return found ? [parseFloat(found[1]), parseFloat(found[2])] : [800, 600];
}

// Pixels per SVG unit: fit to `available` pixels of width, but with the diagram's text (`font` units) kept between
// `minPx` and `maxPx` pixels, times the user's zoom.
export function fitScale(available, width, font, minPx, maxPx, zoom) {
  const fit = Math.max(200, available) / width;
  return Math.min(Math.max(fit, minPx / font), maxPx / font) * (zoom || 1);
}

// A zoom level kept within MIN_ZOOM..MAX_ZOOM.
export function clampZoom(zoom) {
  return Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, zoom));
}

function button(text, title) {
  const item = document.createElement("button");
  item.type = "button";
  item.textContent = text;
  item.title = title;
  return item;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "bvl-diagram bvl-view";
  const bar = document.createElement("div");
  bar.className = "bvl-diagram-controls";
  const readout = document.createElement("span");
  readout.className = "bvl-diagram-zoom";
  const zoomOut = button("−", "zoom out"), fit = button("fit", "fit the width"), zoomIn = button("+", "zoom in");
  bar.append(readout, zoomOut, fit, zoomIn);
  const viewport = document.createElement("div");
  viewport.className = "bvl-diagram-viewport";
  viewport.setAttribute("aria-label", "architecture diagram");
  root.append(bar, viewport);
  el.appendChild(root);

  let shownSvg = null, figure = null, size = [800, 600];
  function scale() {
    return fitScale(viewport.clientWidth - 4, size[0], model.get("font_size") || 14, model.get("min_font_px"),
      model.get("max_font_px"), model.get("zoom"));
  }
  function draw() {
    const svg = model.get("svg");
    if (svg !== shownSvg) {
      shownSvg = svg;
      size = viewBoxSize(svg);
      figure = showFigure(viewport, svg);
    }
    const s = scale();
    if (figure) {
      figure.setAttribute("width", Math.round(size[0] * s));
      figure.setAttribute("height", Math.round(size[1] * s));
    }
    readout.textContent = `text ${Math.round((model.get("font_size") || 14) * s)} px`;
  }
  function setZoom(zoom) {
    model.set("zoom", clampZoom(zoom));
    model.save_changes();
  }
  zoomOut.addEventListener("click", () => setZoom(model.get("zoom") / 1.25));
  zoomIn.addEventListener("click", () => setZoom(model.get("zoom") * 1.25));
  fit.addEventListener("click", () => setZoom(1));
  viewport.addEventListener("wheel", (event) => {
    if (!(event.ctrlKey || event.metaKey)) return;  // a plain wheel scrolls
    event.preventDefault();
    const box = viewport.getBoundingClientRect();
    const x = event.clientX - box.left + viewport.scrollLeft, y = event.clientY - box.top + viewport.scrollTop;
    const before = scale();
    setZoom(model.get("zoom") * Math.exp(-event.deltaY * 0.002));
    draw();
    const ratio = scale() / before;  // keep the point under the cursor in place
    viewport.scrollLeft = x * ratio - (event.clientX - box.left);
    viewport.scrollTop = y * ratio - (event.clientY - box.top);
  }, { passive: false });
  let drag = null;
  viewport.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    drag = { x: event.clientX, y: event.clientY, left: viewport.scrollLeft, top: viewport.scrollTop };
    viewport.setPointerCapture(event.pointerId);
    viewport.classList.add("bvl-dragging");
  });
  viewport.addEventListener("pointermove", (event) => {
    if (!drag) return;
    viewport.scrollLeft = drag.left - (event.clientX - drag.x);
    viewport.scrollTop = drag.top - (event.clientY - drag.y);
  });
  const release = () => { drag = null; viewport.classList.remove("bvl-dragging"); };
  viewport.addEventListener("pointerup", release);
  viewport.addEventListener("pointercancel", release);

  const names = ["change:svg", "change:zoom", "change:font_size", "change:min_font_px", "change:max_font_px"];
  for (const name of names) model.on(name, draw);
  let drawnWidth = 0;
  const observer = new ResizeObserver(() => {
    if (viewport.clientWidth !== drawnWidth) { drawnWidth = viewport.clientWidth; draw(); }
  });
  observer.observe(viewport);
  draw();
  return () => {
    observer.disconnect();
    for (const name of names) model.off(name, draw);
  };
}

export default { render };
