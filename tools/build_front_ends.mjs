// Bundles the widgets' front ends with esbuild: each view's ES module in bertviz_lab/widgets/views (a module with a
// default export, which anywidget loads) becomes one self-contained ES module in views/static/, the helpers it imports
// from shared.js included, so that anywidget, which loads a view's code as one module from a string, can run it.
//
//   node tools/build_front_ends.mjs           the bundles and their external source maps (npm run build)
//   node tools/build_front_ends.mjs --watch   rebuild on every save, source maps inline (npm run watch)
//
// The bundles carry no sourceMappingURL comment: anywidget imports a view's code from a blob: URL, against which a
// relative .map cannot be fetched, and an inline map would be stored in every instance's widget state. The .map files
// beside them (shipped in the wheel) map a reported stack trace back to the sources; for debugging in the browser,
// `npm run watch` writes inline maps instead, which reach the browser with the code.
import * as esbuild from "esbuild";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const VIEWS = "bertviz_lab/widgets/views";
export const OUT = `${VIEWS}/static`;

/** The views' modules: those in VIEWS with a default export (shared.js, a library of helpers, has none). */
export function entryPoints() {
  return readdirSync(path.join(ROOT, VIEWS))
    .filter((name) => name.endsWith(".js"))
    .filter((name) => /^export default /m.test(readFileSync(path.join(ROOT, VIEWS, name), "utf8")))
    .sort()
    .map((name) => `${VIEWS}/${name}`);
}

/** esbuild's options: ES modules for the browsers JupyterLab 4 and Notebook 7 support (ES2022, as ESLint parses). */
export function buildOptions({ inlineMaps = false } = {}) {
  return {
    absWorkingDir: ROOT,
    entryPoints: entryPoints(),
    outdir: OUT,
    bundle: true,
    format: "esm",
    target: "es2022",
    charset: "utf8",
    legalComments: "none",
    sourcemap: inlineMaps ? "inline" : "external",
    metafile: true,
    logLevel: "warning",
  };
}

async function main(argv) {
  if (argv.includes("--watch")) {
    const context = await esbuild.context({ ...buildOptions({ inlineMaps: true }), logLevel: "info" });
    await context.watch();
    return;
  }
  const { metafile } = await esbuild.build(buildOptions());
  const bundles = Object.keys(metafile.outputs).filter((name) => name.endsWith(".js"));
  console.log(`built ${bundles.length} front ends into ${OUT}/`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main(process.argv.slice(2));
}
