// The head atlas's pure functions (atlas.js): the hover texts and the arrow keys over the grid.
import { test } from "node:test";
import assert from "node:assert/strict";
import { atlasTip, moveCell, textTip, valueText } from "../../bertviz_lab/widgets/views/atlas.js";

test("valueText writes four decimals as Python's {:.4f}, and nan for a head not analysed", () => {
  assert.equal(valueText(0.123456), "0.1235");
  assert.equal(valueText(2), "2.0000");
  assert.equal(valueText(new Float32Array([0.3])[0]), "0.3000");
  assert.equal(valueText(NaN), "nan");
});

test("atlasTip names the head, the value in the statistic's unit and the queries averaged", () => {
  assert.equal(atlasTip(3, 7, "weight on [CLS]", "share of attention", 0.5, 12345),
    "layer 3 · head 7\nweight on [CLS]: 0.5000 share of attention\nmean over 12,345 queries");
});

test("textTip keeps a listed text whole, markup as it is (it is set as text)", () => {
  assert.equal(textTip(12, 0.25, "a <b>bold</b> claim"), "#12 · 0.2500\na <b>bold</b> claim");
});

test("moveCell steps over the grid with the arrows, Home and End along a row, and stops at the edges", () => {
  assert.deepEqual(moveCell(null, "ArrowDown", 6, 12), { row: 0, col: 0 });
  assert.deepEqual(moveCell({ row: 0, col: 0 }, "ArrowDown", 6, 12), { row: 1, col: 0 });
  assert.deepEqual(moveCell({ row: 0, col: 0 }, "ArrowUp", 6, 12), { row: 0, col: 0 });
  assert.deepEqual(moveCell({ row: 2, col: 11 }, "ArrowRight", 6, 12), { row: 2, col: 11 });
  assert.deepEqual(moveCell({ row: 2, col: 5 }, "ArrowLeft", 6, 12), { row: 2, col: 4 });
  assert.deepEqual(moveCell({ row: 5, col: 5 }, "Home", 6, 12), { row: 5, col: 0 });
  assert.deepEqual(moveCell({ row: 5, col: 5 }, "End", 6, 12), { row: 5, col: 11 });
  assert.equal(moveCell({ row: 1, col: 1 }, "Enter", 6, 12), null);
  assert.equal(moveCell(null, "ArrowDown", 0, 0), null);
});
