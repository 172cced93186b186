// ESLint (flat config): the widgets' front ends are browser ES modules; the tests of their pure functions run in Node.
import js from "@eslint/js";
import globals from "globals";

export default [
  // docs/assets/javascripts holds a vendored, minified copy of a third-party script (its licence beside it);
  // bertviz_lab/widgets/views/static holds esbuild's bundles of the views (npm run build), linted as their sources.
  {
    ignores: ["node_modules/", "build/", "dist/", "site/", ".venv/", "screenshots/", "docs/assets/javascripts/",
      "bertviz_lab/widgets/views/static/"],
  },
  js.configs.recommended,
  {
    files: ["bertviz_lab/widgets/views/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.browser },
  },
  {
    files: ["tests/js/**/*.mjs", "tools/**/*.mjs", "eslint.config.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.node },
  },
];
