// A live panel hides the static copy of itself that sits in the output above it (same id), so a notebook shows
// one figure: the static copy where no kernel or widget state is there to draw the live one, the live one elsewhere.
// Removing the view (the cell cleared, the widget closed) shows the static copy again.
function render({ model, el }) {
  const id = String(model.get("static_id")).replace(/[^0-9a-f-]/gi, "");
  const style = document.createElement("style");
  style.dataset.bvlHides = id;
  style.textContent =
    `.jp-OutputArea-child:has([data-bvl-static="${id}"]), .output_area:has([data-bvl-static="${id}"]),` +
    ` [data-bvl-static="${id}"] { display: none !important; }`;
  document.head.appendChild(style);
  el.style.display = "none";
  return () => style.remove();
}
export default { render };
