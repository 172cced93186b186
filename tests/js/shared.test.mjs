// The pure helpers every view's front end shares (shared.js), as Node runs them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { bytes, typed, float16s, weightText, redrawScheduler, followDrawing, keepKeysInPanel } from
  "../../bertviz_lab/widgets/views/shared.js";

// Half floats as little-endian bytes, as NumPy's float16 tobytes() writes them on every machine we run.
function halves(...bits) {
  return new DataView(new Uint16Array(bits).buffer);
}

test("float16s decodes normal, subnormal, signed and special halves", () => {
  const decoded = float16s(halves(0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x3555, 0x0000, 0x8000, 0x7c00, 0xfc00,
    0x7e00));
  assert.deepEqual([...decoded.slice(0, 5)], [1, -2, 65504, 2 ** -24, 2 ** -14]);
  assert.equal(decoded[5], Math.fround(1 + 341 / 1024) / 4); // 0x3555: the half nearest 1/3
  assert.ok(Object.is(decoded[6], 0) && Object.is(decoded[7], -0));
  assert.deepEqual([decoded[8], decoded[9]], [Infinity, -Infinity]);
  assert.ok(Number.isNaN(decoded[10]));
});

test("float16s reads a view that starts at an odd offset of its buffer", () => {
  const raw = new Uint8Array([0xff, 0x00, 0x3c, 0x00, 0x38]); // one stray byte, then 1.0 and 0.5
  assert.deepEqual([...float16s(new DataView(raw.buffer, 1, 4))], [1, 0.5]);
});

test("bytes gives the bytes of a DataView, an ArrayBuffer, or nothing", () => {
  const buffer = new Uint8Array([1, 2, 3, 4, 5]).buffer;
  assert.deepEqual([...bytes(new DataView(buffer, 1, 3))], [2, 3, 4]);
  assert.deepEqual([...bytes(buffer)], [1, 2, 3, 4, 5]);
  assert.equal(bytes(null).length, 0);
});

test("typed copies unaligned bytes into an aligned typed array and drops a trailing partial element", () => {
  const raw = new Uint8Array(1 + 8 + 3);
  new DataView(raw.buffer).setFloat32(1, 0.25, true);
  new DataView(raw.buffer).setFloat32(5, -3.5, true);
  const floats = typed(new DataView(raw.buffer, 1, 11), Float32Array);
  assert.deepEqual([...floats], [0.25, -3.5]);
});

test("weightText writes weights with 4 decimals, small ones in scientific notation", () => {
  assert.equal(weightText(0), "0");
  assert.equal(weightText(0.5), "0.5000");
  assert.equal(weightText(0.001), "0.0010");
  assert.equal(weightText(0.000123456), "1.23e-4");
  assert.equal(weightText(-0.25), "-0.2500");
  assert.equal(weightText(NaN), "NaN");
  assert.equal(weightText(Infinity), "Infinity");
});

test("redrawScheduler draws once for a batch of changes, and again for the next batch", async () => {
  let draws = 0;
  const schedule = redrawScheduler(() => { draws += 1; });
  schedule(); schedule(); schedule();
  assert.equal(draws, 0); // not before the batch is over
  await Promise.resolve();
  assert.equal(draws, 1);
  schedule();
  await Promise.resolve();
  assert.equal(draws, 2);
});

// A widget model as a view sees it: listeners by event name.
function fakeModel() {
  const listeners = new Map();
  return {
    listeners,
    on: (name, callback) => listeners.set(name, [...(listeners.get(name) || []), callback]),
    off: (name, callback) => listeners.set(name, (listeners.get(name) || []).filter((c) => c !== callback)),
    change: (name) => (listeners.get(name) || []).forEach((callback) => callback()),
  };
}

test("followDrawing draws at once, once per batch of new drawings, and never after its cleanup", async () => {
  const model = fakeModel();
  let draws = 0;
  const cleanup = followDrawing(model, () => { draws += 1; });
  assert.equal(draws, 1); // the first drawing, before any change
  model.change("change:svg");
  model.change("change:svg");
  await Promise.resolve();
  assert.equal(draws, 2);
  cleanup();
  assert.deepEqual(model.listeners.get("change:svg"), []);
  model.change("change:svg");
  await Promise.resolve();
  assert.equal(draws, 2);
});

// A stand-in for a DOM element: its panel ancestors (innermost first) and the keydown listener it is given.
function element(panels = []) {
  const node = { isConnected: true, dataset: {}, listeners: [], parentElement: null,
    addEventListener(type, listener) { this.listeners.push([type, listener]); } };
  const chain = panels.map(() => ({ dataset: {}, listeners: [], addEventListener(type, listener) {
    this.listeners.push([type, listener]); } }));
  chain.forEach((panel, i) => {
    panel.parentElement = { closest: () => chain[i + 1] || null };
  });
  node.closest = () => chain[0] || null;
  return { node, chain };
}

function press(listener, key, modifiers = {}) {
  let stopped = false;
  listener({ key, ctrlKey: false, metaKey: false, altKey: false, shiftKey: false, ...modifiers,
    stopPropagation() { stopped = true; } });
  return stopped;
}

test("keepKeysInPanel keeps plain keys in the outermost panel and lets the notebook's combinations through", () => {
  const { node, chain } = element([1, 2]); // a view in a panel in the workbench
  keepKeysInPanel(node);
  keepKeysInPanel(node); // a second view of the same workbench installs nothing more
  assert.equal(chain[0].listeners.length, 0);
  assert.equal(chain[1].listeners.length, 1);
  const [[type, listener]] = chain[1].listeners;
  assert.equal(type, "keydown");
  for (const key of ["a", "b", "m", "d", "ArrowDown", "Enter", "Escape", " "]) assert.ok(press(listener, key), key);
  assert.ok(!press(listener, "Enter", { shiftKey: true })); // run the cell
  assert.ok(!press(listener, "s", { ctrlKey: true })); // save
  assert.ok(!press(listener, "s", { metaKey: true }));
  assert.ok(!press(listener, "x", { altKey: true }));
  const alone = element([]); // a view shown by itself: its own element keeps the keys
  keepKeysInPanel(alone.node);
  assert.equal(alone.node.listeners.length, 1);
});
