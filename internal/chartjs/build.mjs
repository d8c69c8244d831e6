// Bundles entry.js with Chart.js into one minified script, with the
// esbuild of package-lock.json, so that the binary carries the overview's
// charts and needs neither Node nor a CDN at run time.
// `go generate ./internal/chartjs` runs it;
// TestChartScriptIsBuiltFromTheLockedPackages runs it again and compares.
//
//	node build.mjs OUT
import { build } from "esbuild";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2];
if (!out) {
  console.error("usage: node build.mjs OUT");
  process.exit(2);
}
const version = JSON.parse(readFileSync(join(here, "../../node_modules/chart.js/package.json"), "utf8")).version;
const res = await build({
  entryPoints: [join(here, "entry.js")],
  bundle: true,
  minify: true,
  format: "iife",
  target: "es2020",
  platform: "browser",
  legalComments: "none",
  charset: "utf8",
  write: false,
  logLevel: "error",
});
const license = "/*! Chart.js " + version + " (MIT License, Copyright (c) 2014-2024 Chart.js Contributors), bundled by internal/chartjs/build.mjs */\n";
writeFileSync(out, license + res.outputFiles[0].text);
