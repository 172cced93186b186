// What every view's front end shares; front_end.py puts it before each module (anywidget loads one module a view).
const SVG_NS = "http://www.w3.org/2000/svg";

// An SVG element with its attributes (and text, always as textContent), appended to `parent`.
function svgEl(parent, name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  parent.appendChild(node);
  return node;
}

// A synced Bytes trait arrives as a DataView (or ArrayBuffer): its bytes as a Uint8Array.
function bytes(value) {
  if (!value) return new Uint8Array(0);
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}
