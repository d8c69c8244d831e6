// Bundles entry.js with @microsoft/teams-js into one minified script, with
// the esbuild of package-lock.json, so that the binary carries teams-js and
// needs neither Node nor a CDN at run time. `go generate ./internal/teamsjs` runs it;
// TestTeamsScriptIsBuiltFromTheLockedPackages runs it again and compares.
//
//	node build.mjs OUT
import { writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { bundle, outputs } from "../bundle.mjs";

const [out] = outputs("OUT");
writeFileSync(out, await bundle(dirname(fileURLToPath(import.meta.url)), {
  pkg: "@microsoft/teams-js",
  license: "MIT License, Copyright (c) Microsoft Corporation",
  by: "internal/teamsjs/build.mjs",
}));
