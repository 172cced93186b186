// The cell grid's pure functions (cell_grid.js): the grid of a figure's cells, and where the keys move.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cellKey, gridOf, nextCell } from "../../bertviz_lab/widgets/views/cell_grid.js";

const cell = (row, col) => ({ dataset: { row: String(row), col: String(col) } });

// a ragged grid: row 0 has columns 0..3, row 1 only 0 and 2, row 3 (no row 2) columns 1..2
const cells = [cell(0, 3), cell(0, 0), cell(0, 1), cell(0, 2), cell(1, 2), cell(1, 0), cell(3, 2), cell(3, 1)];
const at = (row, col) => cells.find((c) => c.dataset.row === String(row) && c.dataset.col === String(col));

test("gridOf groups cells by row and sorts each row by column", () => {
  const rows = gridOf(cells);
  assert.deepEqual([...rows.keys()].sort(), [0, 1, 3]);
  assert.deepEqual(rows.get(0).map(cellKey), ["0,0", "0,1", "0,2", "0,3"]);
  assert.deepEqual(rows.get(1).map(cellKey), ["1,0", "1,2"]);
});

test("the arrows move along a row and to the nearest cell of the row above or below, and stop at the edges", () => {
  const rows = gridOf(cells);
  assert.equal(nextCell(rows, at(0, 1), "ArrowRight"), at(0, 2));
  assert.equal(nextCell(rows, at(0, 3), "ArrowRight"), at(0, 3));
  assert.equal(nextCell(rows, at(0, 0), "ArrowLeft"), at(0, 0));
  assert.equal(nextCell(rows, at(0, 3), "ArrowDown"), at(1, 2)); // row 1 has no column 3
  assert.equal(nextCell(rows, at(1, 0), "ArrowDown"), at(3, 1)); // the missing row 2 is skipped
  assert.equal(nextCell(rows, at(3, 2), "ArrowDown"), at(3, 2));
  assert.equal(nextCell(rows, at(0, 1), "ArrowUp"), at(0, 1));
  assert.equal(nextCell(rows, at(1, 2), "ArrowUp"), at(0, 2));
});

test("Home and End go to a row's ends, PageUp and PageDown to the first and last rows; other keys do not move", () => {
  const rows = gridOf(cells);
  assert.equal(nextCell(rows, at(0, 2), "Home"), at(0, 0));
  assert.equal(nextCell(rows, at(0, 1), "End"), at(0, 3));
  assert.equal(nextCell(rows, at(0, 3), "PageDown"), at(3, 2));
  assert.equal(nextCell(rows, at(3, 1), "PageUp"), at(0, 1));
  assert.equal(nextCell(rows, at(0, 1), "Tab"), null);
  assert.equal(nextCell(rows, at(0, 1), "a"), null);
});
