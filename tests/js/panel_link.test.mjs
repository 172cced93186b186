// The panel link's pure parts (panel_link.js): writing the static copy into a notebook model, and telling whether a
// panel can reach its kernel. The models here have the shape JupyterLab's have (cells and outputs as lists).
import { test } from "node:test";
import assert from "node:assert/strict";
import { copyMessage, kernelProblem, staticId, writeStaticCopy } from "../../bertviz_lab/widgets/views/panel_link.js";

const ID = "0b8f6c1e-2d3a-4e5f-8a9b-0c1d2e3f4a5b";

// A list as JupyterLab's observable lists are: length, get(i), set(i, value).
function list(items) {
  return { items, get length() { return items.length; }, get: (i) => items[i], set(i, value) { items[i] = value; } };
}

// An output model: its data, and toJSON() as nbformat writes it.
function output(data, extra = {}) {
  return { data, toJSON: () => ({ output_type: "display_data", data, metadata: {}, ...extra }) };
}

function copy(body) {
  return `<div class="bvl-static" data-bvl-static="${ID}">${body}</div>`;
}

test("the copy with its id is replaced, keeping the rest of the output; other outputs are left alone", () => {
  const other = output({ "text/html": '<div data-bvl-static="another">x</div>' });
  const widget = output({ "application/vnd.jupyter.widget-view+json": { model_id: "m" } });
  const outputs = list([output({ "text/html": copy("layer 0"), "text/plain": "Workbench (static copy)" },
    { metadata: { isolated: false } }), widget, other]);
  const cells = list([{ outputs: list([]) }, { outputs }, { /* a markdown cell: no outputs */ }]);
  assert.equal(writeStaticCopy(cells, ID, copy("layer 2")), 1);
  assert.deepEqual(outputs.items[0], { output_type: "display_data", metadata: { isolated: false },
    data: { "text/html": copy("layer 2"), "text/plain": "Workbench (static copy)" } });
  assert.equal(outputs.items[1], widget);
  assert.equal(outputs.items[2], other);
});

test("a copy saved as a list of lines is found; an equal copy is not written again", () => {
  const lines = copy("a\nb").split(/(?<=\n)/);
  const outputs = list([output({ "text/html": lines })]);
  assert.equal(writeStaticCopy(list([{ outputs }]), ID, copy("a\nb")), 0);
  assert.equal(writeStaticCopy(list([{ outputs }]), ID, copy("c")), 1);
  assert.equal(outputs.items[0].data["text/html"], copy("c"));
});

test("every copy of a panel shown twice is written", () => {
  const outputs = list([output({ "text/html": copy("1") }), output({ "text/html": copy("1") })]);
  assert.equal(writeStaticCopy(list([{ outputs }]), ID, copy("2")), 2);
});

test("nothing happens without a notebook model, an id or HTML", () => {
  const outputs = list([output({ "text/html": copy("1") })]);
  for (const cells of [null, undefined, {}, { length: 1 }]) assert.equal(writeStaticCopy(cells, ID, copy("2")), 0);
  assert.equal(writeStaticCopy(list([{ outputs }]), "", copy("2")), 0);
  assert.equal(writeStaticCopy(list([{ outputs }]), ID, ""), 0);
  assert.equal(outputs.items[0].data["text/html"], copy("1"));
});

test("the id keeps only what a UUID holds, so it cannot break out of a selector", () => {
  assert.equal(staticId(ID), ID);
  assert.equal(staticId('x"] , body { display: none } [a="'), "bddaea");  // its hex letters only
  assert.equal(staticId(undefined), "");
});

test("a panel reaches its kernel while the session has the kernel it was drawn with, connected and alive", () => {
  const session = (kernel) => ({ session: kernel ? { kernel } : null, isDisposed: false });
  const alive = { id: "k1", status: "idle", connectionStatus: "connected" };
  assert.equal(kernelProblem(session(alive), "k1", false), "");
  assert.equal(kernelProblem(session({ ...alive, status: "busy" }), "k1", false), "");
  assert.equal(kernelProblem(session({ ...alive, connectionStatus: "connecting" }), "k1", false), "");
  assert.equal(kernelProblem(session(null), "k1", false), "none");
  assert.equal(kernelProblem({ session: null, isDisposed: true }, "k1", false), "none");
  assert.equal(kernelProblem(session({ ...alive, status: "dead" }), "k1", false), "none");
  assert.equal(kernelProblem(session({ ...alive, connectionStatus: "disconnected" }), "k1", false), "none");
  assert.equal(kernelProblem(session({ ...alive, id: "k2" }), "k1", false), "none");
  assert.equal(kernelProblem(session(alive), "k1", true), "restarted");
  assert.equal(kernelProblem(null, "", false), "");  // a front end without a session: nothing is claimed
});

test("only a message of type html with a string carries a copy", () => {
  assert.equal(copyMessage({ type: "html", html: "<div>x</div>" }), "<div>x</div>");
  assert.equal(copyMessage({ type: "html", html: "" }), "");
  assert.equal(copyMessage({ type: "html?" }), null);
  assert.equal(copyMessage({ type: "html", html: 3 }), null);
  assert.equal(copyMessage(null), null);
});
