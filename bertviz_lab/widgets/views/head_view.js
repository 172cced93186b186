// The bertviz-style head view: query tokens on the left, key tokens on the right, one line per (query, key) of each
// shown head, its opacity the weight. The lines of every head of the layer are in the synced state, so the head
// chips work without the kernel: a click toggles a head, a double click shows that head alone; the choice goes back
// to Python in `heads`. Hovering a token shows only its lines; clicking a query token (or a line) asks the panel to
// open the neuron view on that query (and the line's head). Token text is only ever set with textContent.
const MAX_LABEL_CHARS = 16;

function short(token) {
  return token.length <= MAX_LABEL_CHARS ? token : token.slice(0, MAX_LABEL_CHARS - 1) + "…";
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "bvl-head-view";
  root.style.cssText = "font: 12px monospace; position: relative;";
  const title = document.createElement("div");
  title.className = "bvl-title";
  title.style.cssText = "font: bold 14px system-ui, sans-serif; margin: 4px 0;";
  const note = document.createElement("div");
  note.className = "bvl-note";
  note.style.cssText = "font: 12px system-ui, sans-serif; color: #555;";
  const chips = document.createElement("div");
  chips.className = "bvl-head-legend";
  chips.title = "click: show or hide a head · double click: only this head";
  const scroller = document.createElement("div");
  scroller.style.cssText = "overflow: auto; max-height: 640px;";
  root.append(title, note, chips, scroller);
  el.appendChild(root);

  function setHeads(heads) {
    model.set("heads", heads);
    model.save_changes();
  }

  function drawChips(numHeads, shown, colors) {
    chips.replaceChildren();
    for (let h = 0; h < numHeads; h++) {
      const on = shown.includes(h), color = colors[h % colors.length];
      const chip = document.createElement("button");
      chip.type = "button";
      chip.className = "bvl-head-chip" + (on ? " bvl-on" : "");
      chip.dataset.head = h;
      chip.textContent = "head " + h;
      chip.setAttribute("aria-pressed", on ? "true" : "false");
      chip.style.cssText = "margin: 2px; padding: 1px 6px; border-radius: 4px; cursor: pointer; font: 12px " +
        "system-ui, sans-serif; border: 2px solid " + color + "; background: " + (on ? color : "#fff") +
        "; color: " + (on ? "#fff" : "#333") + ";";
      // Two clicks toggle twice (no net change) before the double click isolates the head.
      chip.addEventListener("click", () => {
        const now = model.get("heads");
        setHeads(now.includes(h) ? now.filter((x) => x !== h) : [...now, h].sort((a, b) => a - b));
      });
      chip.addEventListener("dblclick", () => setHeads([h]));
      chips.appendChild(chip);
    }
  }

  function draw() {
    const queries = model.get("query_tokens"), keys = model.get("key_tokens");
    const numHeads = model.get("num_heads"), colors = model.get("colors"), k = model.get("k");
    const shown = [...model.get("heads")].sort((a, b) => a - b);
    const box = model.get("geometry");
    const idxRaw = bytes(model.get("indices"));
    const idx = new Uint16Array(idxRaw.slice().buffer);
    const w = bytes(model.get("weights"));
    title.textContent = model.get("title") + " · head" + (shown.length === 1 ? " " : "s ") +
      (shown.length ? shown.join(", ") : "none (click a head)");
    drawChips(numHeads, shown, colors);
    scroller.replaceChildren();
    const { row_h: rowH, col_w: colW, gap, top, min_weight: minWeight } = box;
    const svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("width", colW * 2 + gap);
    svg.setAttribute("height", top * 2 + Math.max(queries.length, keys.length, 1) * rowH);
    scroller.appendChild(svg);
    const lines = svgEl(svg, "g", { class: "bvl-lines" });
    lines.style.cursor = "pointer";
    lines.addEventListener("click", (event) => {
      const line = event.target.closest("line");
      if (line) model.send({ type: "open", query: Number(line.dataset.q), head: Number(line.dataset.head) });
    });
    const all = [];
    // opacity: weight ÷ the strongest line shown, so diffuse heads at long inputs (weights ~1/n) stay visible
    let strongest = 0;
    for (const h of shown) {
      for (let at = h * queries.length * k; at < (h + 1) * queries.length * k && h < numHeads; at++) {
        strongest = Math.max(strongest, w[at]);
      }
    }
    note.textContent = strongest ? `line opacity: attention weight ÷ ${(strongest / 255).toFixed(3)} (the ` +
      `strongest line shown); the ${k} strongest keys of each query` : "";
    for (const h of shown) {
      if (h >= numHeads) continue;
      for (let q = 0; q < queries.length; q++) {
        for (let j = 0; j < k; j++) {
          const at = (h * queries.length + q) * k + j, weight = w[at] / strongest;
          if (!(weight >= minWeight)) continue;
          const line = svgEl(lines, "line", { x1: colW, y1: top + (q + 0.5) * rowH, x2: colW + gap,
            y2: top + (idx[at] + 0.5) * rowH, stroke: colors[h % colors.length], "stroke-width": 2,
            "stroke-opacity": weight.toFixed(3) });
          line.dataset.q = q; line.dataset.key = idx[at]; line.dataset.head = h;
          all.push(line);
        }
      }
    }
    function label(token, x, i, anchor, side) {
      const text = svgEl(svg, "text", { x, y: top + (i + 0.5) * rowH + 4, "text-anchor": anchor,
        class: "bvl-token bvl-" + side }, short(token));
      svgEl(text, "title", {}, `${side} ${i}: ${token}` + (side === "query" ? " · click: open the neuron view" : ""));
      text.style.cursor = side === "query" ? "pointer" : "default";
      if (side === "query") {
        text.addEventListener("click", () => model.send({ type: "open", query: i, head: shown.length ? shown[0] : -1 }));
      }
      text.addEventListener("mouseenter", () => {
        for (const line of all) {
          const mine = side === "query" ? line.dataset.q == i : line.dataset.key == i;
          line.style.display = mine ? "" : "none";
        }
        text.style.fontWeight = "bold";
      });
      text.addEventListener("mouseleave", () => {
        for (const line of all) line.style.display = "";
        text.style.fontWeight = "";
      });
    }
    queries.forEach((token, i) => label(token, colW - 6, i, "end", "query"));
    keys.forEach((token, i) => label(token, colW + gap + 6, i, "start", "key"));
    root.dataset.heads = shown.join(",");
    root.dataset.lines = all.length;
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    queueMicrotask(() => { pending = false; draw(); });
  }
  const names = ["query_tokens", "key_tokens", "num_heads", "heads", "colors", "k", "indices", "weights", "title",
    "geometry"];
  for (const name of names) model.on("change:" + name, schedule);
  draw();
  return () => { for (const name of names) model.off("change:" + name, schedule); };
}

export default { render };
