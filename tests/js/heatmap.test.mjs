// The heatmap front end's pure functions (heatmap.js): which cell a point is in, keyboard moves, the tooltip's text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cellArea, cellAt, moveCell, tipText } from "../../bertviz_lab/widgets/views/heatmap.js";

const area = cellArea({ rows: "3", cols: "4", x: "100", y: "50", cell: "10" }); // as an element's dataset gives it

test("cellArea reads the numbers of the cell area's data- attributes", () => {
  assert.deepEqual(area, { rows: 3, cols: 4, x: 100, y: 50, cell: 10 });
});

test("cellAt finds the cell under a point, edges included on the top-left side", () => {
  assert.deepEqual(cellAt(area, 100, 50), { row: 0, col: 0 });
  assert.deepEqual(cellAt(area, 109.9, 59.9), { row: 0, col: 0 });
  assert.deepEqual(cellAt(area, 110, 60), { row: 1, col: 1 });
  assert.deepEqual(cellAt(area, 139.5, 79.5), { row: 2, col: 3 });
});

test("cellAt is null outside the cells and for a broken area", () => {
  for (const [x, y] of [[99.9, 55], [105, 49.9], [140, 55], [105, 80], [-1, -1]]) {
    assert.equal(cellAt(area, x, y), null, `(${x}, ${y})`);
  }
  assert.equal(cellAt(cellArea({}), 0, 0), null);
});

test("moveCell follows the arrow keys and stops at the edges", () => {
  assert.deepEqual(moveCell(null, "ArrowRight", 3, 4), { row: 0, col: 0 }); // the first key chooses the first cell
  assert.deepEqual(moveCell({ row: 1, col: 1 }, "ArrowRight", 3, 4), { row: 1, col: 2 });
  assert.deepEqual(moveCell({ row: 1, col: 1 }, "ArrowUp", 3, 4), { row: 0, col: 1 });
  assert.deepEqual(moveCell({ row: 2, col: 3 }, "ArrowDown", 3, 4), { row: 2, col: 3 });
  assert.deepEqual(moveCell({ row: 0, col: 0 }, "ArrowLeft", 3, 4), { row: 0, col: 0 });
  assert.equal(moveCell({ row: 0, col: 0 }, "Enter", 3, 4), null);
  assert.equal(moveCell(null, "ArrowDown", 0, 0), null);
});

test("tipText names query and key by position and token, and the weight as hover writes it", () => {
  assert.equal(tipText("[CLS]", 0, "<b>", 7, 0.03125), "query 0·[CLS]\nkey 7·<b>\nweight 0.0313");
  assert.equal(tipText("a", 1, "b", 2, 0.00001), "query 1·a\nkey 2·b\nweight 1.00e-5");
});
