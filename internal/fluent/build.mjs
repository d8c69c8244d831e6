// Bundles entry.js with @fluentui/web-components into one minified script,
// and writes the Fluent 2 design tokens the pages' own styles use, from
// @fluentui/tokens, in front of base.css: both with the packages and the
// esbuild of package-lock.json, so that the binary carries Fluent and needs
// neither Node nor a CDN at run time. `go generate ./internal/fluent` runs
// it; TestFluentIsBuiltFromTheLockedPackages runs it again and compares.
//
//	node build.mjs OUT.js OUT.css
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { bundle, outputs, version } from "../bundle.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const [outJS, outCSS] = outputs("OUT.js", "OUT.css");
writeFileSync(outJS, await bundle(here, {
  pkg: "@fluentui/web-components",
  license: "MIT License, Copyright (c) Microsoft Corporation",
  by: "internal/fluent/build.mjs",
  target: "es2022",
}));

// The tokens a page's own stylesheet may use on native elements, so that
// it looks like Fluent before (and without) the script; the script sets
// every token of the theme when it runs. A token a stylesheet needs is
// added here.
const tokens = [
  "colorNeutralForeground1", "colorNeutralForeground2", "colorNeutralForeground3", "colorNeutralForegroundDisabled",
  "colorNeutralForegroundOnBrand", "colorNeutralForeground2BrandHover",
  "colorNeutralBackground1", "colorNeutralBackground1Hover", "colorNeutralBackground1Pressed",
  "colorNeutralBackground2", "colorNeutralBackground3", "colorNeutralBackground4", "colorNeutralBackgroundDisabled",
  "colorSubtleBackgroundHover", "colorSubtleBackgroundPressed",
  "colorNeutralStroke1", "colorNeutralStroke1Hover", "colorNeutralStroke2", "colorNeutralStrokeAccessible",
  "colorNeutralStrokeDisabled",
  "colorBrandBackground", "colorBrandBackgroundHover", "colorBrandBackgroundPressed",
  "colorBrandForeground1", "colorBrandForegroundLink", "colorBrandForegroundLinkHover", "colorBrandStroke1",
  "colorCompoundBrandStroke",
  "colorStrokeFocus1", "colorStrokeFocus2",
  "colorStatusSuccessBackground1", "colorStatusSuccessBorder1", "colorStatusSuccessForeground1",
  "colorStatusWarningBackground1", "colorStatusWarningBorder1", "colorStatusWarningForeground1",
  "colorStatusDangerBackground1", "colorStatusDangerBorder1", "colorStatusDangerForeground1",
  "colorStatusDangerBackground3", "colorStatusDangerBackground3Hover", "colorStatusDangerBackground3Pressed",
  "colorBackgroundOverlay",
  "borderRadiusSmall", "borderRadiusMedium", "borderRadiusLarge", "borderRadiusXLarge",
  "fontFamilyBase", "fontFamilyMonospace",
  "fontSizeBase200", "fontSizeBase300", "fontSizeBase400", "fontSizeBase500", "fontSizeBase600",
  "lineHeightBase200", "lineHeightBase300", "lineHeightBase400", "lineHeightBase500", "lineHeightBase600",
  "fontWeightRegular", "fontWeightSemibold", "fontWeightBold",
  "strokeWidthThin", "strokeWidthThick",
  "spacingHorizontalXS", "spacingHorizontalS", "spacingHorizontalM", "spacingHorizontalL", "spacingHorizontalXL",
  "spacingVerticalXS", "spacingVerticalS", "spacingVerticalM", "spacingVerticalL", "spacingVerticalXL",
  "shadow4", "shadow16", "shadow64",
];
const t = await import("@fluentui/tokens");
const decls = (theme, only) => tokens.filter((k) => {
  if (!(k in theme)) throw new Error("no token " + k);
  return !only || only(k);
}).map((k) => "  --" + k + ": " + theme[k] + ";\n").join("");
const colors = (k) => k.startsWith("color") || k.startsWith("shadow");
const css = "/*! Fluent 2 design tokens from @fluentui/tokens " + version("@fluentui/tokens") +
  " (MIT License, Copyright (c) Microsoft Corporation), written by internal/fluent/build.mjs in front of base.css */\n" +
  "html {\n  color-scheme: light;\n" + decls(t.webLightTheme) + "}\n" +
  "@media (prefers-color-scheme: dark) {\nhtml {\n  color-scheme: dark;\n" + decls(t.webDarkTheme, colors) + "}\n}\n" +
  "html[data-theme=\"default\"] {\n  color-scheme: light;\n" + decls(t.teamsLightTheme, colors) + "}\n" +
  "html[data-theme=\"dark\"] {\n  color-scheme: dark;\n" + decls(t.teamsDarkTheme, colors) + "}\n" +
  "html[data-theme=\"contrast\"] {\n  color-scheme: dark;\n" + decls(t.teamsHighContrastTheme, colors) + "}\n" +
  readFileSync(join(here, "base.css"), "utf8");
writeFileSync(outCSS, css);
