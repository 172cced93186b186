// The saliency view's pure functions (saliency_view.js): a score's text, the hover text, keyboard moves.
import { test } from "node:test";
import assert from "node:assert/strict";
import { nextToken, progressText, scoreText, tokenTip } from "../../bertviz_lab/widgets/views/saliency_view.js";

test("scoreText writes seven significant digits as Python's {:.7g}", () => {
  const cases = [[0, "0"], [3, "3"], [0.1, "0.1"], [-2.5, "-2.5"], [123456.7, "123456.7"], [1234567.8, "1234568"],
    [12345678, "1.234568e+07"], [-1.234567e-5, "-1.234567e-05"], [0.0001, "0.0001"], [0.00001, "1e-05"]];
  for (const [value, text] of cases) assert.equal(scoreText(value), text, String(value));
  assert.equal(scoreText(new Float32Array([0.1])[0]), "0.1");
  assert.equal(scoreText(NaN), "NaN");
  assert.equal(scoreText(-Infinity), "-Infinity");
});

test("tokenTip names the position, the whole token and the exact score", () => {
  assert.equal(tokenTip(3, "<script>", -0.25), "3 · <script>\nscore -0.25");
});

test("nextToken follows the arrow keys, Home and End, and stops at the ends", () => {
  assert.equal(nextToken(2, "ArrowRight", 5), 3);
  assert.equal(nextToken(4, "ArrowRight", 5), 4);
  assert.equal(nextToken(2, "ArrowLeft", 5), 1);
  assert.equal(nextToken(0, "ArrowUp", 5), 0);
  assert.equal(nextToken(1, "ArrowDown", 5), 2);
  assert.equal(nextToken(3, "Home", 5), 0);
  assert.equal(nextToken(0, "End", 5), 4);
  assert.equal(nextToken(0, "Enter", 5), null);
  assert.equal(nextToken(0, "ArrowRight", 0), null);
});

test("progressText says how many steps of a run are done, and nothing without steps", () => {
  assert.equal(progressText("Integrated gradients", 12, 64), "Integrated gradients: 12/64 steps");
  assert.equal(progressText("Integrated gradients", 70, 64), "Integrated gradients: 64/64 steps");
  assert.equal(progressText("Gradient × input", 0, 0), "");
});
