// The neuron view's pure functions (neuron_view.js): which cell or key row a point is in, keyboard moves, hover text.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  cellAt, cellTip, dimensionTip, nextDimension, nextKey, nextRow, rowAt, rowTip, valueText,
} from "../../bertviz_lab/widgets/views/neuron_view.js";

const block = { x: 100, y: 50, rows: 3, cols: 4, cellW: 8, rowH: 12 };
const rows = { x: 100, y: 50, rowH: 12, rows: 3, right: 400 };

test("cellAt finds the vector cell under a point, top-left edges included", () => {
  assert.deepEqual(cellAt(100, 50, block), { row: 0, col: 0 });
  assert.deepEqual(cellAt(107.9, 61.9, block), { row: 0, col: 0 });
  assert.deepEqual(cellAt(108, 62, block), { row: 1, col: 1 });
  assert.deepEqual(cellAt(131.5, 85.5, block), { row: 2, col: 3 });
});

test("cellAt is null outside the block and for a block without numbers", () => {
  for (const [x, y] of [[99.9, 55], [105, 49.9], [132, 55], [105, 86]]) assert.equal(cellAt(x, y, block), null);
  assert.equal(cellAt(105, 55, { x: NaN, y: NaN, rows: NaN, cols: NaN, cellW: NaN, rowH: NaN }), null);
});

test("rowAt finds the key row across the whole row, and -1 outside", () => {
  assert.equal(rowAt(100, 50, rows), 0);
  assert.equal(rowAt(399, 73.9, rows), 1);
  assert.equal(rowAt(250, 85, rows), 2);
  for (const [x, y] of [[99, 55], [400, 55], [150, 49], [150, 86]]) assert.equal(rowAt(x, y, rows), -1);
});

test("nextRow follows the up and down arrows, Home, End and pages, and stops at the ends", () => {
  assert.equal(nextRow(1, "ArrowDown", 3), 2);
  assert.equal(nextRow(2, "ArrowDown", 3), 2);
  assert.equal(nextRow(1, "ArrowUp", 3), 0);
  assert.equal(nextRow(1, "ArrowLeft", 3), null); // left and right move along the dimensions
  assert.equal(nextRow(1, "ArrowRight", 3), null);
  assert.equal(nextRow(0, "End", 30), 29);
  assert.equal(nextRow(20, "Home", 30), 0);
  assert.equal(nextRow(25, "PageDown", 30), 29);
  assert.equal(nextRow(5, "PageUp", 30), 0);
  assert.equal(nextRow(1, "a", 3), null);
  assert.equal(nextRow(0, "ArrowDown", 0), null);
});

test("valueText keeps six significant digits of a float32", () => {
  const value = new Float32Array([0.123456789])[0];
  assert.equal(valueText(value), "0.123457");
  assert.equal(valueText(-2.5), "-2.5");
  assert.equal(valueText(1.5e-7), "1.5e-7");
  assert.equal(valueText(NaN), "NaN");
});

test("rowTip and cellTip name the key, the dimension and the exact numbers", () => {
  assert.equal(rowTip(9, "<b>", 1.25, 0.0625), "key 9·<b>\nq·k/√d = 1.25\nsoftmax = 0.0625");
  assert.equal(cellTip("key 3·cat", 7, "products", -0.5), "key 3·cat\ndimension 7\nq ⊙ k = -0.5");
  assert.equal(cellTip("query", 0, "q", 2), "query\ndimension 0\nq = 2");
});

test("nextDimension moves along a row's dimensions with left and right, -1 being the row as a whole", () => {
  assert.equal(nextDimension(-1, "ArrowRight", 4), 0);
  assert.equal(nextDimension(0, "ArrowRight", 4), 1);
  assert.equal(nextDimension(3, "ArrowRight", 4), 3);
  assert.equal(nextDimension(0, "ArrowLeft", 4), -1);
  assert.equal(nextDimension(-1, "ArrowLeft", 4), -1);
  assert.equal(nextDimension(2, "ArrowDown", 4), null);
  assert.equal(nextDimension(-1, "ArrowRight", 0), null);
});

test("dimensionTip gives q, k and their product at one dimension of a key's row", () => {
  assert.equal(dimensionTip("key 2·<i>", 5, 0.5, -2, -1), "key 2·<i>\ndimension 5\nq = 0.5\nk = -2\nq ⊙ k = -1");
});

test("nextKey moves along all the keys and the window follows only when the row leaves it", () => {
  // 512 keys, a window of 48 from row 100
  assert.deepEqual(nextKey(120, "ArrowDown", 100, 48, 512), { row: 121, first: 100 }); // inside: no new window
  assert.deepEqual(nextKey(147, "ArrowDown", 100, 48, 512), { row: 148, first: 101 }); // one past the edge
  assert.deepEqual(nextKey(100, "ArrowUp", 100, 48, 512), { row: 99, first: 99 });
  assert.deepEqual(nextKey(140, "PageDown", 100, 48, 512), { row: 150, first: 103 });
  assert.deepEqual(nextKey(140, "End", 100, 48, 512), { row: 511, first: 464 });
  assert.deepEqual(nextKey(140, "Home", 100, 48, 512), { row: 0, first: 0 });
  assert.deepEqual(nextKey(3, "ArrowDown", 0, 10, 10), { row: 4, first: 0 }); // a short text: one window
  assert.equal(nextKey(3, "ArrowLeft", 0, 48, 512), null);
});
