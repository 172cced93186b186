// The model view's pure functions (model_view.js): what a click does, which heads are off after one, the hover text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { clickAction, thumbTip, toggleAblated } from "../../bertviz_lab/widgets/views/model_view.js";

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
  assert.equal(thumbTip(on, "open", "rows: queries"),
    "layer 2, head 5\nattention moved by 0.123\nrows: queries\nclick: open it as the heatmap · shift-click: " +
    "switch it off");
  assert.equal(thumbTip({ layer: "0", head: "1", off: "true", change: "0.0000" }, "ablate", ""),
    "layer 0, head 1 (switched off)\nclick: switch it on again");
  assert.equal(thumbTip({ layer: "3", head: "0" }, "ablate", ""), "layer 3, head 0\nclick: switch it off");
});
