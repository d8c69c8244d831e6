// Validates a Teams app manifest.json with Microsoft's own validator, the
// npm package @microsoft/app-manifest (the library behind the Microsoft 365
// Agents Toolkit's `validate --manifest-file`), offline: the package carries
// the 1.29 schema, and every network call is refused here so that a
// validation can never depend on a download.
//
// Usage: node validate.cjs manifest.json
// Prints {"errors": [...]} and exits 0 when there are none, 1 when there
// are, 2 when the validator could not run.
"use strict";

const http = require("node:http");
const https = require("node:https");

function offline() {
  throw new Error("network access refused: the manifest must validate offline");
}
globalThis.fetch = async () => offline();
http.request = http.get = offline;
https.request = https.get = offline;

async function main() {
  const file = process.argv[2];
  if (!file) {
    throw new Error("usage: node validate.cjs manifest.json");
  }
  const fs = require("node:fs");
  const { TeamsManifestWrapper } = require("@microsoft/app-manifest/build/wrappers");
  fs.accessSync(file, fs.constants.R_OK);
  let manifest;
  try {
    // Reading checks the manifest's types first (a required key missing,
    // a number for a string): such a manifest is invalid, as for the
    // toolkit.
    manifest = await TeamsManifestWrapper.read(file);
  } catch (err) {
    process.stdout.write(JSON.stringify({ errors: [String(err.message || err)] }) + "\n");
    process.exitCode = 1;
    return;
  }
  const errors = await manifest.validate();
  process.stdout.write(JSON.stringify({ errors }) + "\n");
  process.exitCode = errors.length === 0 ? 0 : 1;
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
  process.exitCode = 2;
});
