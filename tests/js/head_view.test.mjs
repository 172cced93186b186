// The head view's pure functions (head_view.js): which heads a chip click leaves on, which lines a token owns, and
// what activating a chip, a token or a line does.
import { test } from "node:test";
import assert from "node:assert/strict";
import { action, linesOf, toggledHeads } from "../../bertviz_lab/widgets/views/head_view.js";

test("toggledHeads adds a hidden head in order and removes a shown one", () => {
  assert.deepEqual(toggledHeads([2], 1), [1, 2]);
  assert.deepEqual(toggledHeads([1, 2, 5], 2), [1, 5]);
  assert.deepEqual(toggledHeads([3], 3), []);
  assert.deepEqual(toggledHeads([], 0), [0]);
  const shown = [4, 0];
  toggledHeads(shown, 2);
  assert.deepEqual(shown, [4, 0]); // the synced list is not changed in place
});

test("linesOf selects a query row's lines, or the lines that end at a key", () => {
  assert.equal(linesOf("query", 3), 'g.bvl-head-lines > g[data-q="3"] > line');
  assert.equal(linesOf("key", "12"), 'g.bvl-head-lines line[data-key="12"]');
  assert.throws(() => linesOf("value", 1), /side must be "query" or "key", got value/);
  for (const bad of [-1, 1.5, "x", undefined]) assert.throws(() => linesOf("query", bad), /whole number/);
});

test("a chip toggles its head; a query token opens the neuron view in the lowest head shown", () => {
  assert.deepEqual(action({ kind: "chip", head: 3 }, [1]), { toggle: 3 });
  assert.deepEqual(action({ kind: "token", side: "query", index: 7 }, [5, 2]), { open: { query: 7, head: 2 } });
  assert.deepEqual(action({ kind: "token", side: "query", index: 0 }, []), { open: { query: 0, head: -1 } });
});

test("a line opens its own query and head; a key token and nothing do nothing", () => {
  assert.deepEqual(action({ kind: "line", query: 4, head: 6 }, [1, 6]), { open: { query: 4, head: 6 } });
  assert.equal(action({ kind: "token", side: "key", index: 2 }, [0]), null);
  assert.equal(action(null, [0]), null);
});
