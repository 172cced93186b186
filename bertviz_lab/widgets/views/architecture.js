// The architecture diagram (Graphviz SVG) fit to the panel's width with readable text, zoom buttons, ctrl+wheel zoom
// and drag-to-pan. Drawn from the synced SVG and zoom alone, so a reload or a second tab shows the same view. The SVG
// is shown as an image element: nothing in it can run.

function viewBoxSize(svg) {
  const found = /viewBox="\s*[-\d.]+[\s,]+[-\d.]+[\s,]+([\d.]+)[\s,]+([\d.]+)\s*"/.exec(svg);
  return found ? [parseFloat(found[1]), parseFloat(found[2])] : [800, 600];
}

function button(text, title) {
  const item = document.createElement("button");
  item.type = "button";
  item.textContent = text;
  item.title = title;
  item.style.cssText = "margin-left: 2px; min-width: 28px; padding: 1px 6px; cursor: pointer;";
  return item;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "bvl-diagram";
  root.style.cssText = "position: relative; font: 12px system-ui, sans-serif;";
  const bar = document.createElement("div");
  bar.className = "bvl-diagram-controls";
  bar.style.cssText = "position: absolute; top: 6px; right: 18px; z-index: 1; background: rgba(255,255,255,0.9); " +
    "padding: 2px 4px; border-radius: 4px; display: flex; align-items: center; gap: 2px;";
  const readout = document.createElement("span");
  readout.className = "bvl-diagram-zoom";
  readout.style.cssText = "margin-right: 4px; color: #555;";
  const zoomOut = button("−", "zoom out"), fit = button("fit", "fit the width"), zoomIn = button("+", "zoom in");
  bar.append(readout, zoomOut, fit, zoomIn);
  const viewport = document.createElement("div");
  viewport.className = "bvl-diagram-viewport";
  viewport.style.cssText = "overflow: auto; max-height: 640px; border: 1px solid #e0e3e8; border-radius: 4px; " +
    "cursor: grab; background: #fff;";
  const image = document.createElement("img");
  image.alt = "architecture diagram";
  image.draggable = false;
  image.style.cssText = "display: block; margin: 0 auto; user-select: none; max-width: none;";
  viewport.appendChild(image);
  root.append(bar, viewport);
  el.appendChild(root);

  let shownSvg = null, size = [800, 600];
  function scale() {
    const font = model.get("font_size") || 14;
    const fitWidth = Math.max(200, viewport.clientWidth - 4) / size[0];
    const base = Math.min(Math.max(fitWidth, model.get("min_font_px") / font), model.get("max_font_px") / font);
    return base * (model.get("zoom") || 1);
  }
  function draw() {
    const svg = model.get("svg");
    if (svg !== shownSvg) {
      shownSvg = svg;
      size = viewBoxSize(svg);
      image.src = svg ? "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svg) : "";
    }
    const s = scale();
    image.style.width = `${Math.round(size[0] * s)}px`;
    image.style.height = `${Math.round(size[1] * s)}px`;
    readout.textContent = `text ${Math.round((model.get("font_size") || 14) * s)} px`;
  }
  function setZoom(zoom) {
    model.set("zoom", Math.min(8, Math.max(0.1, zoom)));
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
    viewport.style.cursor = "grabbing";
  });
  viewport.addEventListener("pointermove", (event) => {
    if (!drag) return;
    viewport.scrollLeft = drag.left - (event.clientX - drag.x);
    viewport.scrollTop = drag.top - (event.clientY - drag.y);
  });
  const release = () => { drag = null; viewport.style.cursor = "grab"; };
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
