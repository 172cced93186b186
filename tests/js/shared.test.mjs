// The pure helpers every view's front end shares (shared.js), as Node runs them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { bytes, typed, float16s, weightText, redrawScheduler, followDrawing, keepKeysInPanel, keptByPanel, SUPPRESS }
  from "../../bertviz_lab/widgets/views/shared.js";

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

// A focusable element inside a panel (or not), with the attributes Lumino reads.
function target(inPanel) {
  const attributes = new Map();
  return {
    closest: (selector) => (inPanel && selector.includes(".bvl-panel") ? {} : null),
    hasAttribute: (name) => attributes.has(name),
    setAttribute: (name, value) => attributes.set(name, value),
    removeAttribute: (name) => attributes.delete(name),
    attributes,
  };
}

function press(listener, element, key, modifiers = {}) {
  listener({ key, target: element, ctrlKey: false, metaKey: false, altKey: false, shiftKey: false, ...modifiers });
  return element.attributes.get(SUPPRESS) === "true";
}

test("keepKeysInPanel marks the focused element of a panel for one plain key press, once per page", async () => {
  const listeners = [];
  const scope = { addEventListener: (type, listener, capture) => listeners.push([type, listener, capture]) };
  const view = { dataset: {} };
  keepKeysInPanel(view, scope);
  keepKeysInPanel({ dataset: {} }, scope); // a second view installs nothing more
  assert.equal(view.dataset.bvlKeys, "kept"); // a view shown alone counts as a panel
  assert.equal(listeners.length, 1);
  const [[type, listener, capture]] = listeners;
  assert.equal(type, "keydown");
  assert.equal(capture, true); // ahead of Notebook 7's capturing listener on the document
  for (const key of ["a", "b", "m", "d", "ArrowDown", "Enter", "Escape", " "]) {
    const element = target(true);
    assert.ok(press(listener, element, key), key);
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.ok(!element.attributes.has(SUPPRESS), key); // gone after the key press
  }
  assert.ok(!press(listener, target(true), "Enter", { shiftKey: true })); // run the cell
  assert.ok(!press(listener, target(true), "s", { ctrlKey: true })); // save
  assert.ok(!press(listener, target(true), "s", { metaKey: true }));
  assert.ok(!press(listener, target(true), "x", { altKey: true }));
  assert.ok(!press(listener, target(false), "a")); // outside every panel: the notebook's
  assert.ok(!keptByPanel({ key: "a", target: null }));
});
