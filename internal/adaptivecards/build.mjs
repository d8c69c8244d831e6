// Bundles entry.js (with hostconfig.js and markdown.js) and Microsoft's
// Adaptive Cards renderer into one minified script, with the esbuild of
// package-lock.json, so that the binary carries the renderer and needs
// neither Node nor a CDN at run time. `go generate ./internal/adaptivecards`
// runs it; TestCardsScriptIsBuiltFromTheLockedPackages runs it again and
// compares.
//
//	node build.mjs OUT
import { writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { bundle, outputs } from "../bundle.mjs";

const [out] = outputs("OUT");
writeFileSync(out, await bundle(dirname(fileURLToPath(import.meta.url)), {
  pkg: "adaptivecards",
  license: "MIT License, Copyright (c) Microsoft Corporation",
  by: "internal/adaptivecards/build.mjs",
}));
