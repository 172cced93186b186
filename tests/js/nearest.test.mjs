// The nearest-contexts view's pure functions (nearest.js): a score's text and a match's hover text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { matchTip, scoreText } from "../../bertviz_lab/widgets/views/nearest.js";

test("scoreText writes four decimals as Python's {:.4f}", () => {
  assert.equal(scoreText(0.987654), "0.9877");
  assert.equal(scoreText(1), "1.0000");
  assert.equal(scoreText(-0.5), "-0.5000");
});

test("matchTip gives the text id, position, score and the token bracketed in its whole context", () => {
  assert.equal(matchTip(4, 7, 0.9, "by the", "bank", "of the river"),
    "#4 · position 7 · score 0.9000\nby the [bank] of the river");
  assert.equal(matchTip(0, 1, 0.5, "", "<script>", "ran"), "#0 · position 1 · score 0.5000\n[<script>] ran");
});

test("rowKey opens a match on Enter or Space and moves the focus along the matches with the arrows", async () => {
  const { rowKey } = await import("../../bertviz_lab/widgets/views/shared.js");
  const focused = [], opened = [];
  const rows = [0, 1, 2].map((i) => ({ i, focus: () => focused.push(i) }));
  const key = (name) => ({ key: name, prevented: false, preventDefault() { this.prevented = true; } });
  const enter = key("Enter");
  assert.equal(rowKey(enter, rows, rows[1], (row) => opened.push(row.i)), true);
  assert.ok(enter.prevented);
  assert.equal(rowKey(key(" "), rows, rows[2], (row) => opened.push(row.i)), true);
  assert.deepEqual(opened, [1, 2]);
  rowKey(key("ArrowDown"), rows, rows[1], () => {});
  rowKey(key("ArrowDown"), rows, rows[2], () => {});
  rowKey(key("Home"), rows, rows[2], () => {});
  assert.deepEqual(focused, [2, 2, 0]);
  const tab = key("Tab");
  assert.equal(rowKey(tab, rows, rows[0], () => {}), false);
  assert.ok(!tab.prevented);
});
