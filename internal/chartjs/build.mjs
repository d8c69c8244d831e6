// Bundles entry.js with Chart.js into one minified script, with the
// esbuild of package-lock.json, so that the binary carries the overview's
// charts and needs neither Node nor a CDN at run time.
// `go generate ./internal/chartjs` runs it;
// TestChartScriptIsBuiltFromTheLockedPackages runs it again and compares.
//
//	node build.mjs OUT
import { writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { bundle, outputs } from "../bundle.mjs";

const [out] = outputs("OUT");
writeFileSync(out, await bundle(dirname(fileURLToPath(import.meta.url)), {
  pkg: "chart.js",
  name: "Chart.js",
  license: "MIT License, Copyright (c) 2014-2024 Chart.js Contributors",
  by: "internal/chartjs/build.mjs",
}));
