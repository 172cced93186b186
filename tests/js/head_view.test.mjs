// The head view's pure functions (head_view.js): which heads a chip click leaves on, which lines a token owns, and
// what activating a chip, a token or a line does.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  action, linesOf, nextQuery, toggledHeads,
} from "../../bertviz_lab/widgets/views/head_view.js";
import { windowFirst, wheeledFirst } from "../../bertviz_lab/widgets/views/shared.js";

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

test("nextQuery steps the selected query with the arrows, the page keys (a window), Home and End", () => {
  assert.equal(nextQuery(5, "ArrowDown", 512, 32, 0), 6);
  assert.equal(nextQuery(5, "ArrowUp", 512, 32, 0), 4);
  assert.equal(nextQuery(0, "ArrowUp", 512, 32, 0), 0);
  assert.equal(nextQuery(5, "PageDown", 512, 32, 0), 37);
  assert.equal(nextQuery(5, "End", 512, 32, 0), 511);
  assert.equal(nextQuery(-1, "ArrowDown", 512, 32, 96), 96); // none selected: the window's first row
  assert.equal(nextQuery(5, "ArrowLeft", 512, 32, 0), null);
  assert.equal(nextQuery(5, "Enter", 512, 32, 0), null);
});

test("windowFirst moves the window as little as it takes to show the query, inside the rows", () => {
  assert.equal(windowFirst(10, 0, 512, 32), 0);
  assert.equal(windowFirst(32, 0, 512, 32), 1);
  assert.equal(windowFirst(300, 0, 512, 32), 269);
  assert.equal(windowFirst(3, 100, 512, 32), 3);
  assert.equal(windowFirst(-1, 600, 512, 32), 480); // none selected: kept inside
  assert.equal(windowFirst(5, 3, 20, 32), 0); // a short text: everything from row 0
  assert.equal(wheeledFirst(10, 120, 512, 32), 13);
  assert.equal(wheeledFirst(1, -4, 512, 32), 0); // kept inside
  assert.equal(wheeledFirst(479, 1, 512, 32), 480);
});
