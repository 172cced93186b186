// The query-key map's pure functions (qk_map.js): points in pixels, the point under the pointer, moving between
// points with the arrow keys, and the hover text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HIT_PX, nearestPoint, pixelPoints, pointTip, stepPoint } from "../../bertviz_lab/widgets/views/qk_map.js";

const frame = { x: 60, y: 60, width: 400, height: 200, x0: -1, x1: 1, y0: 0, y1: 2 };

test("pixelPoints maps data to the frame, y growing downwards", () => {
  const { px, py } = pixelPoints([-1, 1, 0], [0, 2, 1], frame);
  assert.deepEqual([...px], [60, 460, 260]);
  assert.deepEqual([...py], [260, 60, 160]);
});

test("nearestPoint finds the closest point within the hit radius, else -1", () => {
  const px = new Float32Array([10, 20, 40]), py = new Float32Array([10, 10, 10]);
  assert.equal(nearestPoint(px, py, 12, 11), 0);
  assert.equal(nearestPoint(px, py, 16, 10), 1);
  assert.equal(nearestPoint(px, py, 30, 10 + HIT_PX + 1), -1);
  assert.equal(nearestPoint(new Float32Array(0), new Float32Array(0), 0, 0), -1);
});

test("stepPoint moves to the nearest point in the arrow's direction, and stays at the last one", () => {
  //   0 at (0,0), 1 at (10,1), 2 at (30,0), 3 at (0,20): right of 0 is 1, below 0 is 3, left of 0 nothing
  const px = new Float32Array([0, 10, 30, 0]), py = new Float32Array([0, 1, 0, 20]);
  assert.equal(stepPoint(px, py, 0, "ArrowRight"), 1);
  assert.equal(stepPoint(px, py, 1, "ArrowRight"), 2);
  assert.equal(stepPoint(px, py, 2, "ArrowRight"), 2);
  assert.equal(stepPoint(px, py, 0, "ArrowDown"), 3);
  assert.equal(stepPoint(px, py, 0, "ArrowLeft"), 0);
  assert.equal(stepPoint(px, py, -1, "ArrowLeft"), 0);
  assert.equal(stepPoint(px, py, 0, "Enter"), null);
});

test("pointTip says query or key, the token, its context and where it comes from", () => {
  assert.equal(pointTip(true, "bank", "the [bank] of", 12, 3), "key · bank\nthe [bank] of\ntext #12 · position 3");
  assert.equal(pointTip(false, "<b>", "[<b>]", 0, 1), "query · <b>\n[<b>]\ntext #0 · position 1");
});
