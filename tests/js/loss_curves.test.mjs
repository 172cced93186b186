// The loss curves' hover (loss_curves.js): the plot frame's ranges, pointer to step, nearest points, hover text.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  chartSteps, formatValue, hoverLines, nearestIndex, nextCursor, pixelOf, plotOf, stepAt, xPixel,
} from "../../bertviz_lab/widgets/views/loss_curves.js";

// a plot frame as the kernel draws it: attributes as strings, read through getAttribute
const frame = (attrs) => ({ getAttribute: (name) => (name in attrs ? String(attrs[name]) : null) });
const plot = plotOf(frame({ x: 62, y: 26, width: 346, height: 168, "data-x0": 0, "data-x1": 300, "data-y0": 0.5,
  "data-y1": 2.5, "data-log-y": 0, "data-keys": "train_mlm_loss eval_mlm_loss" }));

test("plotOf reads the ranges, pixel box and series keys of a plot frame", () => {
  assert.deepEqual(plot, { x0: 0, x1: 300, y0: 0.5, y1: 2.5, logY: false, left: 62, top: 26, width: 346,
    height: 168, keys: ["train_mlm_loss", "eval_mlm_loss"] });
  const empty = plotOf(frame({ x: 62, y: 26, width: 346, height: 168, "data-keys": "", "data-log-y": 1 }));
  assert.deepEqual(empty.keys, []);
  assert.ok(empty.logY && Number.isNaN(empty.x0));
});

test("stepAt maps a pointer's fraction of the plot's width to a step, null outside or without data", () => {
  assert.equal(stepAt(0, plot), 0);
  assert.equal(stepAt(0.5, plot), 150);
  assert.equal(stepAt(1, plot), 300);
  assert.equal(stepAt(-0.01, plot), null);
  assert.equal(stepAt(1.01, plot), null);
  assert.equal(stepAt(0.5, { ...plot, x0: NaN }), null);
});

test("xPixel and pixelOf put data points where the kernel drew them (linear and log y)", () => {
  assert.equal(xPixel(150, plot), 62 + 173);
  assert.deepEqual(pixelOf(300, 2.5, plot), [408, 26]);
  assert.deepEqual(pixelOf(0, 0.5, plot), [62, 194]);
  const log = { ...plot, logY: true, y0: -3, y1: -1 };
  assert.deepEqual(pixelOf(0, 0.01, log), [62, 26 + 84]);
  assert.equal(pixelOf(0, 0, log), null); // log of zero: not drawn
  assert.equal(pixelOf(0, NaN, plot), null);
});

test("nearestIndex finds the nearest x of interleaved (x, y) pairs, ties to the earlier one", () => {
  const xy = new Float32Array([0, 9, 10, 8, 20, 7, 30, 6]);
  assert.equal(nearestIndex(xy, -5), 0);
  assert.equal(nearestIndex(xy, 4), 0);
  assert.equal(nearestIndex(xy, 5), 0);
  assert.equal(nearestIndex(xy, 6), 1);
  assert.equal(nearestIndex(xy, 29), 3);
  assert.equal(nearestIndex(xy, 1000), 3);
  assert.equal(nearestIndex(new Float32Array(0), 3), -1);
});

test("formatValue keeps 3 significant digits and writes tiny or huge values in scientific notation", () => {
  assert.equal(formatValue(0.123456), "0.123");
  assert.equal(formatValue(2.5), "2.5");
  assert.equal(formatValue(0), "0");
  assert.equal(formatValue(0.00012), "1.20e-4");
  assert.equal(formatValue(123456), "1.23e+5");
  assert.equal(formatValue(NaN), "NaN");
});

test("hoverLines names each series' value at its nearest point, and that point's step when it differs", () => {
  const train = new Float32Array([1, 3.0, 2, 2.5, 3, 2.0]);
  const evaluated = new Float32Array([0, 4.0, 25, 1.5]);
  const hovered = hoverLines(2.2, [{ name: "train MLM", xy: train }, { name: "eval MLM", xy: evaluated }]);
  assert.equal(hovered.step, 2);
  assert.deepEqual(hovered.lines, ["step 2", "train MLM: 2.5", "eval MLM: 4 (step 0)"]);
  assert.equal(hoverLines(3, [{ name: "none yet", xy: new Float32Array(0) }]), null);
});

test("chartSteps lists every step a chart's series draw a point at, ascending, once each", () => {
  const train = new Float32Array([1, 2.0, 2, 1.5, 3, 1.2, 4, 1.1]);
  const evaluation = new Float32Array([2, 1.9, 4, 1.4, 6, 1.3]);
  assert.deepEqual(chartSteps([train, evaluation]), [1, 2, 3, 4, 6]);
  assert.deepEqual(chartSteps([new Float32Array(0)]), []);
  assert.deepEqual(chartSteps([]), []);
});

test("nextCursor: left and right move along the steps, up and down between charts, the first key starts it", () => {
  assert.deepEqual(nextCursor({ chart: 0, step: -1 }, "ArrowRight", 4, 10), { chart: 0, step: 0 });
  assert.deepEqual(nextCursor({ chart: 0, step: -1 }, "ArrowLeft", 4, 10), { chart: 0, step: 9 });
  assert.deepEqual(nextCursor({ chart: 0, step: 3 }, "ArrowRight", 4, 10), { chart: 0, step: 4 });
  assert.deepEqual(nextCursor({ chart: 0, step: 9 }, "ArrowRight", 4, 10), { chart: 0, step: 9 });
  assert.deepEqual(nextCursor({ chart: 0, step: 3 }, "ArrowLeft", 4, 10), { chart: 0, step: 2 });
  assert.deepEqual(nextCursor({ chart: 0, step: 3 }, "End", 4, 10), { chart: 0, step: 9 });
  assert.deepEqual(nextCursor({ chart: 0, step: 3 }, "Home", 4, 10), { chart: 0, step: 0 });
  assert.deepEqual(nextCursor({ chart: 0, step: 2 }, "PageDown", 4, 30), { chart: 0, step: 12 });
  assert.deepEqual(nextCursor({ chart: 1, step: 3 }, "ArrowDown", 4, 10), { chart: 2, step: 3 });
  assert.deepEqual(nextCursor({ chart: 3, step: 3 }, "ArrowDown", 4, 10), { chart: 3, step: 3 });
  assert.deepEqual(nextCursor({ chart: 0, step: 3 }, "ArrowUp", 4, 10), { chart: 0, step: 3 });
  assert.equal(nextCursor({ chart: 0, step: 3 }, "Enter", 4, 10), null);
  assert.equal(nextCursor({ chart: 0, step: -1 }, "ArrowRight", 4, 0), null);
  assert.equal(nextCursor({ chart: 0, step: -1 }, "ArrowDown", 0, 0), null);
});
