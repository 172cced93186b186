// The heatmap front end's pure functions (heatmap.js): which cell a point is in, keyboard moves, the tooltip's text,
// and the window a zoom, a pan, a typed range or an arrow key asks the kernel to draw.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  MIN_WINDOW, cellArea, cellAt, followCell, indexWindow, moveCell, positionWindow, tipText, typedWindow, zoomWindow,
} from "../../bertviz_lab/widgets/views/heatmap.js";

const area = cellArea({ rows: "3", cols: "4", x: "100", y: "50", cell: "10" }); // as an element's dataset gives it

test("cellArea reads the numbers of the cell area's data- attributes", () => {
  assert.deepEqual(area, { rows: 3, cols: 4, x: 100, y: 50, cellW: 10, cellH: 10, row0: 0, col0: 0, top: null });
  const band = cellArea({ rows: "32", cols: "512", x: "0", y: "0", cellW: "1", cellH: "18" }); // a band of queries
  assert.deepEqual([band.cellW, band.cellH], [1, 18]);
  assert.deepEqual(cellAt(band, 300.5, 20), { row: 1, col: 300 });
  const zoomed = cellArea({ rows: "2", cols: "2", x: "0", y: "0", cell: "5", row0: "40", col0: "7", top: "0.25" });
  assert.deepEqual([zoomed.row0, zoomed.col0, zoomed.top], [40, 7, 0.25]);
});

test("cellAt gives a zoomed window's cell as its row and column in the whole matrix", () => {
  const zoomed = cellArea({ rows: "2", cols: "2", x: "0", y: "0", cell: "5", row0: "40", col0: "7" });
  assert.deepEqual(cellAt(zoomed, 0, 0), { row: 40, col: 7 });
  assert.deepEqual(cellAt(zoomed, 9, 6), { row: 41, col: 8 });
  assert.equal(cellAt(zoomed, 10, 0), null);
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

test("tipText says when the true weight lies beyond the colour scale", () => {
  assert.equal(tipText("[CLS]", 0, "[SEP]", 9, 0.97, 0.23),
    "query 0·[CLS]\nkey 9·[SEP]\nweight 0.9700 (beyond the colour scale's 0.2300: clipped)");
  assert.equal(tipText("a", 1, "b", 2, 0.2, 0.23), "query 1·a\nkey 2·b\nweight 0.2000");
  assert.equal(tipText("a", 1, "b", 2, 0.9, null), "query 1·a\nkey 2·b\nweight 0.9000"); // a per-row scale
});

// rows at positions 1..10 (no [CLS]), columns at 0..11
const rowPositions = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], colPositions = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];

test("indexWindow turns token positions into matrix rows and columns; [] or an empty window is the whole", () => {
  assert.deepEqual(indexWindow([3, 6, 0, 2], rowPositions, colPositions), { r0: 2, r1: 5, c0: 0, c1: 2 });
  assert.deepEqual(indexWindow([], rowPositions, colPositions), { r0: 0, r1: 10, c0: 0, c1: 12 });
  assert.deepEqual(indexWindow([50, 60, 0, 2], rowPositions, colPositions), { r0: 0, r1: 10, c0: 0, c1: 12 });
  assert.deepEqual(indexWindow([0, 2, 10, 99], rowPositions, colPositions), { r0: 0, r1: 1, c0: 10, c1: 12 });
});

test("positionWindow writes a window back as positions, and the whole matrix as []", () => {
  const win = { r0: 2, r1: 5, c0: 0, c1: 2 };
  assert.deepEqual(positionWindow(win, rowPositions, colPositions), [3, 6, 0, 2]);
  assert.deepEqual(indexWindow(positionWindow(win, rowPositions, colPositions), rowPositions, colPositions), win);
  assert.deepEqual(positionWindow({ r0: 0, r1: 10, c0: 0, c1: 12 }, rowPositions, colPositions), []);
});

test("zoomWindow halves to powers of two around a cell, down to MIN_WINDOW, and doubles back to the whole", () => {
  let win = { r0: 0, r1: 512, c0: 0, c1: 512 };
  const sizes = [];
  for (let i = 0; i < 6; i++) {
    win = zoomWindow(win, 1, { row: 300, col: 10 }, 512, 512);
    sizes.push(win.r1 - win.r0);
    assert.ok(win.r0 <= 300 && 300 < win.r1 && win.c0 <= 10 && 10 < win.c1, JSON.stringify(win));
    assert.ok(win.c0 >= 0 && win.r1 <= 512);
  }
  assert.deepEqual(sizes, [256, 128, 64, 32, 16, MIN_WINDOW]);
  assert.deepEqual(zoomWindow({ r0: 0, r1: 510, c0: 0, c1: 510 }, 1, { row: 0, col: 0 }, 510, 510),
    { r0: 0, r1: 256, c0: 0, c1: 256 }); // not a power of two: the one below
  let out = { r0: 296, r1: 304, c0: 6, c1: 14 };
  for (let i = 0; i < 7; i++) out = zoomWindow(out, -1, { row: 300, col: 10 }, 512, 512);
  assert.deepEqual(out, { r0: 0, r1: 512, c0: 0, c1: 512 });
  const atEdge = zoomWindow({ r0: 0, r1: 64, c0: 0, c1: 64 }, 1, { row: 63, col: 63 }, 64, 64);
  assert.deepEqual(atEdge, { r0: 32, r1: 64, c0: 32, c1: 64 }); // kept inside the matrix
});

test("followCell moves the window as little as it takes to show a cell", () => {
  const win = { r0: 10, r1: 42, c0: 0, c1: 32 };
  assert.deepEqual(followCell(win, { row: 20, col: 5 }), win);
  assert.deepEqual(followCell(win, { row: 42, col: 5 }), { r0: 11, r1: 43, c0: 0, c1: 32 });
  assert.deepEqual(followCell(win, { row: 9, col: 40 }), { r0: 9, r1: 41, c0: 9, c1: 41 });
});

test("typedWindow shows the typed positions (ends included, either order) on one side", () => {
  const whole = { r0: 0, r1: 10, c0: 0, c1: 12 };
  assert.deepEqual(typedWindow(whole, "query", 3, 5, rowPositions, colPositions), { r0: 2, r1: 5, c0: 0, c1: 12 });
  assert.deepEqual(typedWindow(whole, "key", 11, 4, rowPositions, colPositions), { r0: 0, r1: 10, c0: 4, c1: 12 });
  assert.equal(typedWindow(whole, "query", 40, 50, rowPositions, colPositions), whole); // no token there: unchanged
});
