import { redrawScheduler, showFigure, keepKeysInPanel } from "./shared.js";
// The architecture diagram: the panel's figure (the `svg` trait, the same document the static copy and exports hold)
// fit to the panel's width with readable text, zoom buttons, "fit" (the whole diagram in both directions), "width"
// (back to the width with readable text), ctrl+wheel zoom and drag-to-pan. Drawn from the synced figure, fit and zoom
// alone, so a reload or a second tab shows the same view; the page's theme styles it (figure.css, architecture.css).
//
// Mermaid gets the same view: the kernel cannot draw mermaid, the front end's own renderer draws it in the panel's
// output marked .bvl-mermaid-source (JupyterLab and Notebook 7: an <img> of an SVG in .jp-RenderedMermaid); once that
// drawing is there, this view shows it with the same fit, zoom and pan and the panel hides the source output
// (.bvl-mermaid-shown). Where no renderer draws it, the source output stays as it is and this view stays hidden.

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

// Pixels per SVG unit that fit the whole figure (`width` x `height` units) in `available` pixels of width and
// `availableHeight` pixels of height, times the user's zoom.
export function wholeScale(available, availableHeight, width, height, zoom) {
  const fit = Math.min(Math.max(50, available) / width, Math.max(50, availableHeight) / height);
  return fit * (zoom || 1);
}

// The SVG text of an <img>'s data: URL ("data:image/svg+xml,..." or ";base64,..."), or "" for any other source.
export function svgOfDataUrl(src) {
  const found = /^data:image\/svg\+xml(;[^,]*)?,(.*)$/s.exec(src || "");
  if (!found) return "";
  try {
    return /;base64/.test(found[1] || "") ? atob(found[2]) : decodeURIComponent(found[2]);
  } catch {
    return "";
  }
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
  keepKeysInPanel(el);
  const root = document.createElement("div");
  root.className = "bvl-diagram bvl-view";
  const bar = document.createElement("div");
  bar.className = "bvl-diagram-controls";
  const readout = document.createElement("span");
  readout.className = "bvl-diagram-zoom";
  const zoomOut = button("−", "zoom out"), zoomIn = button("+", "zoom in");
  const fit = button("fit", "fit the whole diagram"), width = button("width", "fit the width, with readable text");
  bar.append(readout, zoomOut, fit, width, zoomIn);
  const viewport = document.createElement("div");
  viewport.className = "bvl-diagram-viewport";
  viewport.setAttribute("aria-label", "architecture diagram");
  viewport.setAttribute("role", "group");  // a named box; focusable, so the keyboard scrolls it
  viewport.tabIndex = 0;
  root.append(bar, viewport);
  el.appendChild(root);

  let shown = null, figure = null, size = [800, 600], panel = null, watcher = null;
  function scale() {
    if (model.get("fit") === "whole") {
      const height = parseFloat(getComputedStyle(viewport).maxHeight) || 640;
      return wholeScale(viewport.clientWidth - 4, height - 4, size[0], size[1], model.get("zoom"));
    }
    return fitScale(viewport.clientWidth - 4, size[0], model.get("font_size") || 14, model.get("min_font_px"),
      model.get("max_font_px"), model.get("zoom"));
  }
  // The panel around the view, watched (once attached) for the mermaid drawing its source output gets.
  function watchPanel() {
    if (watcher || !el.isConnected) return panel;
    panel = el.closest(".bvl-panel");
    if (!panel) return null;
    watcher = new MutationObserver((changes) => {
      if (changes.some((change) => !root.contains(change.target))) schedule();
    });
    watcher.observe(panel, { childList: true, subtree: true, attributes: true, attributeFilter: ["src"] });
    return panel;
  }
  // The mermaid drawing the front end made in the panel's source output, as an image URL ("" while there is none).
  function mermaidUrl() {
    const source = watchPanel() && panel.querySelector(".bvl-mermaid-source .jp-RenderedMermaid img");
    const src = source ? source.getAttribute("src") || "" : "";
    return svgOfDataUrl(src) ? src : "";
  }
  // The figure in the viewport: the kernel's SVG inline (the page's theme styles it), or mermaid's as an image.
  function showSource(mermaid, source) {
    if (!mermaid) {
      size = viewBoxSize(source);
      return showFigure(viewport, source);
    }
    size = viewBoxSize(svgOfDataUrl(source));
    const image = document.createElement("img");
    image.src = source;
    image.alt = "architecture diagram (mermaid)";
    image.draggable = false;
    viewport.replaceChildren(image);
    return image;
  }
  function draw() {
    const mermaid = model.get("renderer") === "mermaid";
    const source = mermaid ? mermaidUrl() : model.get("svg");
    watchPanel();
    if (panel) panel.classList.toggle("bvl-mermaid-shown", mermaid && Boolean(source));
    root.style.display = source ? "" : "none";
    if (source !== shown) {
      shown = source;
      figure = source ? showSource(mermaid, source) : showFigure(viewport, "");
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
  function setFit(mode) {
    model.set("fit", mode);
    model.set("zoom", 1);
    model.save_changes();
  }
  fit.addEventListener("click", () => setFit("whole"));
  width.addEventListener("click", () => setFit("width"));
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

  const schedule = redrawScheduler(draw);
  const names = ["change:svg", "change:zoom", "change:fit", "change:renderer", "change:font_size",
    "change:min_font_px", "change:max_font_px"];
  for (const name of names) model.on(name, draw);
  let drawnWidth = 0;
  const observer = new ResizeObserver(() => {
    if (viewport.clientWidth !== drawnWidth || !watcher) { drawnWidth = viewport.clientWidth; draw(); }
  });
  observer.observe(el);
  observer.observe(viewport);
  draw();
  return () => {
    observer.disconnect();
    if (watcher) watcher.disconnect();
    if (panel) panel.classList.remove("bvl-mermaid-shown");
    for (const name of names) model.off(name, draw);
  };
}

export default { render };
