// Validates Adaptive Cards with the official renderer library (npm
// "adaptivecards"), the way a Teams client parses them.
//
// Usage: node validate.cjs FILE...
// Each FILE holds a JSON array of messages {summary, contentType, content},
// as the golden files do, or a single card object.
//
// Every card is parsed with AdaptiveCard.parse under a SerializationContext
// targeting 1.5 (Teams desktop and web) and 1.2 (Teams mobile). Any parse
// event or validateProperties() failure fails the card. So does an element or
// action that the 1.2 parse drops (it would vanish on mobile), an input
// property that the parse drops or changes without an event (a string
// "value" of an Input.Number is dropped: the input would show empty), a
// ToggleVisibility whose target is missing, or an Open button that is not
// https.
//
// Exit status: 0 all valid, 1 some card invalid, 2 could not run.
"use strict";

const fs = require("fs");

let AC;
try {
  // Resolved from this file upwards, so the repository's node_modules.
  AC = require("adaptivecards/dist/adaptivecards.js");
} catch (e) {
  console.error(
    "validate.cjs: cannot load the adaptivecards package (npm adaptivecards@3.0.6 in node_modules): " +
      e.message
  );
  process.exit(2);
}

const versions = [AC.Versions.v1_5, AC.Versions.v1_2];

// countTyped counts objects with a "type" (elements, inlines, actions).
function countTyped(v) {
  if (Array.isArray(v)) return v.reduce((n, x) => n + countTyped(x), 0);
  if (v && typeof v === "object") {
    let n = typeof v.type === "string" ? 1 : 0;
    for (const k of Object.keys(v)) n += countTyped(v[k]);
    return n;
  }
  return 0;
}

// walk calls f on every object of a card's JSON.
function walk(v, f) {
  if (Array.isArray(v)) return v.forEach((x) => walk(x, f));
  if (v && typeof v === "object") {
    f(v);
    for (const k of Object.keys(v)) walk(v[k], f);
  }
}

// same compares two JSON values, case aside (the parse writes enum values
// in its own case: "Email" for "email").
function same(a, b) {
  return JSON.stringify(a).toLowerCase() === JSON.stringify(b).toLowerCase();
}

// inputLosses lists the properties of an input that the parsed card lost
// or changed: each property sent must come back from toJSON as it was, or
// be left out because it is the property's default.
function inputLosses(card, o, context) {
  const el = card.getElementById(o.id);
  if (!el) return [`${o.type} "${o.id}" is not in the parsed card`];
  const kept = el.toJSON(context) || {};
  const schema = el.getSchema();
  const losses = [];
  for (const k of Object.keys(o)) {
    if (k === "type" || k === "id") continue;
    if (k in kept) {
      if (!same(kept[k], o[k])) losses.push(`${o.type} "${o.id}": its ${k} ${JSON.stringify(o[k])} is parsed as ${JSON.stringify(kept[k])}`);
      continue;
    }
    let def;
    for (let i = 0; i < schema.getCount(); i++) {
      const prop = schema.getItemAt(i);
      if (prop.name !== k) continue;
      def = prop.defaultValue;
      if (prop instanceof AC.EnumProperty && def !== undefined) def = prop.enumType[def];
    }
    if (def === undefined || !same(def, o[k])) losses.push(`${o.type} "${o.id}": its ${k} ${JSON.stringify(o[k])} is dropped by the parse`);
  }
  return losses;
}

function validateCard(json) {
  const problems = [];
  for (const version of versions) {
    const at = "v" + version.toString();
    const context = new AC.SerializationContext(version);
    const card = new AC.AdaptiveCard();
    card.parse(json, context);
    for (let i = 0; i < context.eventCount; i++) {
      const e = context.getEventAt(i);
      problems.push(`${at} parse: ${AC.ValidationEvent[e.event]}: ${e.message}`);
    }
    const results = card.validateProperties();
    for (const e of results.validationEvents) {
      problems.push(`${at} validate: ${AC.ValidationEvent[e.event]}: ${e.message}`);
    }
    const kept = countTyped(card.toJSON(context));
    const sent = countTyped(json);
    if (kept !== sent) {
      problems.push(`${at}: ${sent - kept} of ${sent} elements, inlines or actions are dropped by the parse`);
    }
    walk(json, (o) => {
      if (typeof o.type === "string" && o.type.startsWith("Input.")) {
        for (const l of inputLosses(card, o, context)) problems.push(`${at}: ${l}`);
      }
      if (o.type === "Action.ToggleVisibility") {
        for (const t of o.targetElements || []) {
          const id = typeof t === "string" ? t : t.elementId;
          if (!card.getElementById(id)) problems.push(`${at}: ToggleVisibility target "${id}" does not exist`);
        }
      }
    });
  }
  walk(json, (o) => {
    if (o.type === "Action.OpenUrl" && !/^https:\/\/[^/]/.test(o.url || "")) {
      problems.push(`Action.OpenUrl to a non-https address: ${JSON.stringify(o.url)}`);
    }
  });
  return problems;
}

let failed = false;
const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("validate.cjs: no files given");
  process.exit(2);
}
for (const file of files) {
  let doc;
  try {
    doc = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    console.error(`validate.cjs: ${file}: ${e.message}`);
    process.exit(2);
  }
  const cards = Array.isArray(doc) ? doc.map((m) => m.content) : [doc];
  cards.forEach((card, i) => {
    const problems = validateCard(card);
    if (problems.length > 0) {
      failed = true;
      for (const p of problems) console.log(`FAIL ${file} card ${i}: ${p}`);
    } else {
      console.log(`ok ${file} card ${i}`);
    }
  });
}
process.exit(failed ? 1 : 0);
