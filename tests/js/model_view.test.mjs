// The model view's pure functions (model_view.js): what a click or key does, where the arrows go, which heads are off
// after one, the hover text and the thumbnails' names.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  clickAction, keyAction, nextThumb, thumbLabel, thumbTip, toggleAblated,
} from "../../bertviz_lab/widgets/views/model_view.js";

test("clickAction opens the head, or toggles it in ablate mode or with shift held", () => {
  assert.equal(clickAction("open", false), "open");
  assert.equal(clickAction("open", true), "toggle");
  assert.equal(clickAction("ablate", false), "toggle");
  assert.equal(clickAction("ablate", true), "toggle");
});

test("toggleAblated switches a head off in layer-then-head order and on again, without changing its input", () => {
  const off = [[1, 7]];
  assert.deepEqual(toggleAblated(off, 0, 3), [[0, 3], [1, 7]]);
  assert.deepEqual(toggleAblated([[0, 3], [1, 7]], 1, 2), [[0, 3], [1, 2], [1, 7]]);
  assert.deepEqual(toggleAblated([[0, 3], [1, 7]], 0, 3), [[1, 7]]);
  assert.deepEqual(toggleAblated([], 2, 0), [[2, 0]]);
  assert.deepEqual(off, [[1, 7]]);
});

test("thumbTip names the head, its change and what a click does in each mode", () => {
  const on = { layer: "2", head: "5", change: "0.12345" };
  const keys = (toggle) => `\nkeys: Enter open · Space ${toggle} · Esc all heads on · arrows move`;
  assert.equal(thumbTip(on, "open", "rows: queries"),
    "layer 2, head 5\nattention moved by 0.123\nrows: queries\nclick: open it as the heatmap · shift-click: " +
    "switch it off" + keys("switch it off"));
  assert.equal(thumbTip({ layer: "0", head: "1", off: "true", change: "0.0000" }, "ablate", ""),
    "layer 0, head 1 (switched off)\nclick: switch it on again" + keys("switch it on again"));
  assert.equal(thumbTip({ layer: "3", head: "0" }, "ablate", ""),
    "layer 3, head 0\nclick: switch it off" + keys("switch it off"));
});

test("keyAction: Enter opens, Space and Shift+Enter switch the head, Escape switches every head on", () => {
  assert.equal(keyAction("Enter", false), "open");
  assert.equal(keyAction("Enter", true), "toggle");
  assert.equal(keyAction(" ", false), "toggle");
  assert.equal(keyAction(" ", true), "toggle");
  assert.equal(keyAction("Escape", false), "reset");
  for (const key of ["a", "Tab", "ArrowUp", "Delete"]) assert.equal(keyAction(key, false), null);
});

test("nextThumb moves by head across a layer and by layer down the grid, and stops at the edges", () => {
  assert.deepEqual(nextThumb([1, 1], "ArrowRight", 3, 4), [1, 2]);
  assert.deepEqual(nextThumb([1, 3], "ArrowRight", 3, 4), [1, 3]);
  assert.deepEqual(nextThumb([1, 1], "ArrowLeft", 3, 4), [1, 0]);
  assert.deepEqual(nextThumb([1, 0], "ArrowLeft", 3, 4), [1, 0]);
  assert.deepEqual(nextThumb([1, 2], "ArrowDown", 3, 4), [2, 2]);
  assert.deepEqual(nextThumb([2, 2], "ArrowDown", 3, 4), [2, 2]);
  assert.deepEqual(nextThumb([1, 2], "ArrowUp", 3, 4), [0, 2]);
  assert.deepEqual(nextThumb([1, 2], "Home", 3, 4), [1, 0]);
  assert.deepEqual(nextThumb([1, 2], "End", 3, 4), [1, 3]);
  assert.deepEqual(nextThumb([1, 2], "PageUp", 3, 4), [0, 2]);
  assert.deepEqual(nextThumb([1, 2], "PageDown", 3, 4), [2, 2]);
  assert.equal(nextThumb([1, 2], "Enter", 3, 4), null);
  assert.equal(nextThumb([0, 0], "ArrowDown", 0, 0), null);
});

test("thumbLabel names the layer, the head and whether it is switched off", () => {
  assert.equal(thumbLabel({ layer: "4", head: "11" }), "layer 4, head 11, on");
  assert.equal(thumbLabel({ layer: "0", head: "3", off: "true" }), "layer 0, head 3, switched off");
});
