// The one esbuild call of the service's bundled front-end packages
// (internal/adaptivecards, chartjs, fluent and teamsjs): each package's
// build.mjs names its entry, its npm package and its license line, and
// this makes the minified browser script with the esbuild of
// package-lock.json, so that every bundle is built alike.
import { build } from "esbuild";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const modules = join(dirname(fileURLToPath(import.meta.url)), "../node_modules");

// version is the installed version of the npm package name.
export function version(name) {
  return JSON.parse(readFileSync(join(modules, name, "package.json"), "utf8")).version;
}

// outputs reads the output files a build.mjs was given, exiting with its
// usage when they are not all there.
export function outputs(...names) {
  const out = process.argv.slice(2);
  if (out.length < names.length || out.some((o) => !o)) {
    console.error("usage: node build.mjs " + names.join(" "));
    process.exit(2);
  }
  return out;
}

// bundle builds dir's entry.js into one minified script for browsers of
// target and returns it after the license comment, which names pkg (as
// name, when given), its version and its license, and the build.mjs that
// bundled it.
export async function bundle(dir, { pkg, name = pkg, license, by, target = "es2020" }) {
  const res = await build({
    entryPoints: [join(dir, "entry.js")],
    bundle: true,
    minify: true,
    format: "iife",
    target,
    platform: "browser",
    legalComments: "none",
    charset: "utf8",
    write: false,
    logLevel: "error",
  });
  return "/*! " + name + " " + version(pkg) + " (" + license + "), bundled by " + by + " */\n" + res.outputFiles[0].text;
}
