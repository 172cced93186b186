// The build of the views' front ends (tools/build_front_ends.mjs, npm run build), run here in memory: one ES module
// per view, holding the shared helpers it uses once and importing nothing, that loads from a URL with no folder
// (anywidget imports a view's code from a blob: URL), with a source map back to the sources.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import * as esbuild from "esbuild";
import { OUT, ROOT, VIEWS, buildOptions, entryPoints } from "../../tools/build_front_ends.mjs";

const SHARED = `${VIEWS}/shared.js`;
const source = (name) => readFileSync(path.join(ROOT, name), "utf8");
const importsShared = (name) => /from "\.\/shared\.js";/.test(source(name));

async function build(options) {
  const result = await esbuild.build({ ...options, write: false, logLevel: "silent" });
  const files = Object.fromEntries(result.outputFiles.map((file) => [path.relative(ROOT, file.path), file.text]));
  return { files, metafile: result.metafile };
}

const release = await build(buildOptions());

test("every view module is bundled on its own, and the shared helpers' module is not", () => {
  const entries = entryPoints();
  assert.ok(entries.includes(`${VIEWS}/heatmap.js`) && entries.includes(`${VIEWS}/panel_link.js`));
  assert.ok(!entries.includes(SHARED));
  const bundles = Object.values(release.metafile.outputs).map((output) => output.entryPoint).filter(Boolean).sort();
  assert.deepEqual(bundles, entries);
  for (const entry of entries) {
    assert.ok(`${OUT}/${path.basename(entry)}` in release.files, entry);
  }
});

test("a view that imports shared.js holds it, declares each shared helper it keeps once, and imports nothing", () => {
  const helpers = [...source(SHARED).matchAll(/^export (?:function|const) (\w+)/gm)].map((found) => found[1]);
  let sharing = 0;
  for (const [name, output] of Object.entries(release.metafile.outputs)) {
    if (!output.entryPoint) continue;
    assert.deepEqual(output.imports, [], `${name} imports at run time`);
    const code = release.files[name];
    assert.doesNotMatch(code, /^import /m, name);
    if (!importsShared(output.entryPoint)) continue;
    sharing += 1;
    assert.ok(SHARED in output.inputs, `${name} does not hold shared.js`);
    const kept = helpers.filter((helper) => new RegExp(`^(?:function|const|var|let) ${helper}\\b`, "m").test(code));
    assert.ok(kept.length > 0, name);
    for (const helper of kept) {
      const declared = code.match(new RegExp(`^(?:function|const|var|let) ${helper}\\b`, "gm"));
      assert.equal(declared.length, 1, `${name} declares ${helper} ${declared.length} times`);
    }
  }
  assert.ok(sharing >= 10, `only ${sharing} views import shared.js`);
});

test("each bundle loads as an ES module from a URL with no folder and exports anywidget's render", async () => {
  for (const entry of entryPoints()) {
    const code = release.files[`${OUT}/${path.basename(entry)}`];
    const loaded = await import(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`);
    assert.equal(typeof loaded.default.render, "function", entry);
  }
});

test("the bundles' source maps lead back to the view's source and shared.js", () => {
  const map = JSON.parse(release.files[`${OUT}/heatmap.js.map`]);
  const sources = map.sources.map((name) => path.relative(ROOT, path.resolve(ROOT, OUT, name)));
  assert.deepEqual(sources.sort(), [`${VIEWS}/heatmap.js`, SHARED].sort());
  assert.equal(map.sourcesContent[map.sources.findIndex((name) => name.endsWith("heatmap.js"))],
    source(`${VIEWS}/heatmap.js`));
  // no sourceMappingURL: relative to anywidget's blob: URL the .map cannot be fetched
  assert.doesNotMatch(release.files[`${OUT}/heatmap.js`], /sourceMappingURL/);
});

test("the watch build (npm run watch) maps inline, where anywidget's blob: URL keeps it", async () => {
  const watched = await build(buildOptions({ inlineMaps: true }));
  assert.ok(!(`${OUT}/heatmap.js.map` in watched.files));
  assert.match(watched.files[`${OUT}/heatmap.js`], /\/\/# sourceMappingURL=data:application\/json;base64,/);
});
