// The architecture view's pure functions (architecture.js): the figure's size, the fitted scale, the zoom's bounds.
import { test } from "node:test";
import assert from "node:assert/strict";
import { MAX_ZOOM, MIN_ZOOM, clampZoom, fitScale, svgOfDataUrl, viewBoxSize, wholeScale } from "../../bertviz_lab/widgets/views/architecture.js";

test("viewBoxSize reads the width and height of the figure's viewBox, [800, 600] without one", () => {
  assert.deepEqual(viewBoxSize('<svg class="bvl-fig" width="517" height="799" viewBox="0 0 517 799">'), [517, 799]);
  assert.deepEqual(viewBoxSize('<svg viewBox="0.00 0.00 94.50,171.25">'), [94.5, 171.25]);
  assert.deepEqual(viewBoxSize('<svg width="10" height="10">'), [800, 600]);
  assert.deepEqual(viewBoxSize(""), [800, 600]);
});

test("fitScale fits the width while the text stays between the smallest and largest size", () => {
  assert.equal(fitScale(1000, 1000, 14, 12, 16, 1), 1); // 14 px text: within 12..16
  assert.equal(fitScale(400, 1000, 14, 12, 16, 1), 12 / 14); // too narrow: text kept at 12 px, the view scrolls
  assert.equal(fitScale(4000, 1000, 14, 12, 16, 1), 16 / 14); // wide: text no larger than 16 px
  assert.equal(fitScale(1000, 1000, 14, 12, 16, 2), 2); // the user's zoom multiplies the fitted scale
  assert.equal(fitScale(0, 100, 14, 1, 100, 1), 2); // never fit to less than 200 px
});

test("clampZoom keeps the zoom within its bounds", () => {
  assert.equal(clampZoom(1.25), 1.25);
  assert.equal(clampZoom(100), MAX_ZOOM);
  assert.equal(clampZoom(0), MIN_ZOOM);
});

test("wholeScale fits the whole figure in both directions, times the zoom", () => {
  assert.equal(wholeScale(800, 600, 400, 1200, 1), 0.5); // tall: the height decides
  assert.equal(wholeScale(800, 600, 1600, 300, 1), 0.5); // wide: the width decides
  assert.equal(wholeScale(800, 600, 400, 1200, 2), 1); // the user's zoom multiplies it
  const [width, height] = [517, 2400];
  const s = wholeScale(700, 636, width, height, 1);
  assert.ok(width * s <= 700 && height * s <= 636 && (width * s === 700 || Math.abs(height * s - 636) < 1e-9));
});

test("svgOfDataUrl reads the SVG of an image's data: URL, plain or base64, and nothing else", () => {
  const svg = '<svg viewBox="-8 -8 300 900"><text>a & b</text></svg>';
  assert.equal(svgOfDataUrl("data:image/svg+xml," + encodeURIComponent(svg)), svg);
  assert.equal(svgOfDataUrl("data:image/svg+xml;base64," + Buffer.from(svg).toString("base64")), svg);
  assert.deepEqual(viewBoxSize(svgOfDataUrl("data:image/svg+xml," + encodeURIComponent(svg))), [300, 900]);
  assert.equal(svgOfDataUrl("https://example.com/a.svg"), "");
  assert.equal(svgOfDataUrl("data:image/png;base64,AAAA"), "");
  assert.equal(svgOfDataUrl("data:image/svg+xml,%E0%A4%A"), ""); // a broken escape
});
