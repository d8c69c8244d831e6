// Bundles entry.js (with hostconfig.js and markdown.js) and Microsoft's
// Adaptive Cards renderer into one minified script, with the esbuild of
// package-lock.json, so that the binary carries the renderer and needs
// neither Node nor a CDN at run time. `go generate ./internal/adaptivecards`
// runs it; TestCardsScriptIsBuiltFromTheLockedPackages runs it again and
// compares.
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
const version = JSON.parse(readFileSync(join(here, "../../node_modules/adaptivecards/package.json"), "utf8")).version;
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
const license = "/*! adaptivecards " + version + " (MIT License, Copyright (c) Microsoft Corporation), bundled by internal/adaptivecards/build.mjs */\n";
writeFileSync(out, license + res.outputFiles[0].text);
