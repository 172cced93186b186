import { showFigure, followDrawing } from "./shared.js";
// A figure the kernel drew (views/figure_view.py), shown as it is: the same SVG document as the static copy and the
// export; its <title> elements are the browser's tooltips. The view's element (div.bvl-figure-view) says how many
// drawings it has shown in data-draws, for tools and tests.

function render({ model, el }) {
  const holder = document.createElement("div");
  holder.className = "bvl-figure-view bvl-view";
  el.appendChild(holder);
  let draws = 0;
  const draw = () => {
    showFigure(holder, model.get("svg"));
    draws += 1;
    holder.dataset.draws = draws;
  };
  return followDrawing(model, draw);
}

export default { render };
