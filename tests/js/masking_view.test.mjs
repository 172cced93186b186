// The masking view's pure functions (masking_view.js): which positions a click leaves masked, what a chip says to a
// screen reader, and where the keyboard goes among the chips.
import { test } from "node:test";
import assert from "node:assert/strict";
import { activePosition, chipLabel, movedPosition, toggled } from "../../bertviz_lab/widgets/views/masking_view.js";

test("toggled masks an unmasked position in order and unmasks a masked one", () => {
  assert.deepEqual(toggled([5], 2), [2, 5]);
  assert.deepEqual(toggled([2, 5, 9], 5), [2, 9]);
  assert.deepEqual(toggled([3], 3), []);
  assert.deepEqual(toggled([], 10), [10]);
  assert.deepEqual(toggled([10], 9), [9, 10]); // numbers, not strings: 9 before 10
  const chosen = [7, 1];
  toggled(chosen, 4);
  assert.deepEqual(chosen, [7, 1]); // the synced list is not changed in place
  for (const bad of [-1, 1.5, "3", undefined, NaN]) assert.throws(() => toggled([], bad), /whole number >= 0/);
});

test("chipLabel names the token, its position and what Space does to it", () => {
  assert.equal(chipLabel("paris", 6, false), "token paris at position 6: not masked; Space masks it");
  assert.equal(chipLabel("capital", 2, true), "token capital at position 2: masked; Space unmasks it");
});

test("activePosition keeps the keyboard on its chip after a redraw, else goes to the first chip", () => {
  assert.equal(activePosition([1, 2, 3], 2), 2);
  assert.equal(activePosition([1, 2, 3], 9), 1);
  assert.equal(activePosition([4, 5], null), 4);
  assert.equal(activePosition([], 2), null);
});

test("movedPosition steps with the arrows, jumps with Home and End, and stops at the ends", () => {
  const positions = [1, 2, 3, 5, 8]; // a typed [MASK] at 4 and the specials are not chips to stop on
  assert.equal(movedPosition(positions, 3, "ArrowRight"), 5);
  assert.equal(movedPosition(positions, 5, "ArrowLeft"), 3);
  assert.equal(movedPosition(positions, 2, "ArrowDown"), 3);
  assert.equal(movedPosition(positions, 2, "ArrowUp"), 1);
  assert.equal(movedPosition(positions, 8, "ArrowRight"), 8);
  assert.equal(movedPosition(positions, 1, "ArrowLeft"), 1);
  assert.equal(movedPosition(positions, 3, "Home"), 1);
  assert.equal(movedPosition(positions, 3, "End"), 8);
  assert.equal(movedPosition(positions, 3, "a"), null);
  assert.equal(movedPosition(positions, 3, "Tab"), null); // Tab leaves the chips: they are one tab stop
  assert.equal(movedPosition([], 3, "ArrowRight"), null);
});
