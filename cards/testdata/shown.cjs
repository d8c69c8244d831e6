// Prints the text a person reads in each TextBlock and TextRun of Adaptive
// Cards, as the official renderer library (npm "adaptivecards") shows it:
// each card is parsed with AdaptiveCard.parse at 1.5, and the text of every
// TextBlock and TextRun of the parsed card goes through the library's own
// formatText, the step of TextBlock's and TextRun's render that evaluates
// the {{DATE()}} and {{TIME()}} functions (card-elements.ts) before the
// markdown is applied. Teams evaluates them the same way.
//
// Usage: node shown.cjs FILE...
// Each FILE holds a JSON array of messages {summary, contentType, content},
// as the golden files do, or a single card object. The output is one JSON
// object: for each file, for each card, the texts in order.
//
// Exit status: 0 printed, 2 could not run.
"use strict";

const fs = require("fs");

let AC, formatText;
try {
  AC = require("adaptivecards/dist/adaptivecards.js");
  ({ formatText } = require("adaptivecards/lib/text-formatters.js"));
} catch (e) {
  console.error(
    "shown.cjs: cannot load the adaptivecards package (npm adaptivecards@3.0.6 in node_modules): " + e.message
  );
  process.exit(2);
}

// Texts of the parsed card, in order: TextBlocks, and the TextRuns of
// RichTextBlocks, inside containers too.
function texts(element, out) {
  if (element instanceof AC.TextBlock) {
    out.push(formatText(element.lang, element.text));
  } else if (element instanceof AC.RichTextBlock) {
    for (let i = 0; i < element.getInlineCount(); i++) {
      const inline = element.getInlineAt(i);
      if (inline instanceof AC.TextRun) out.push(formatText(inline.lang, inline.text));
    }
  } else if (typeof element.getItemCount === "function") {
    for (let i = 0; i < element.getItemCount(); i++) texts(element.getItemAt(i), out);
  }
  return out;
}

const result = {};
for (const file of process.argv.slice(2)) {
  const doc = JSON.parse(fs.readFileSync(file, "utf8"));
  const cards = Array.isArray(doc) ? doc.map((m) => m.content) : [doc];
  result[file] = cards.map((json) => {
    const card = new AC.AdaptiveCard();
    card.parse(json, new AC.SerializationContext(AC.Versions.v1_5));
    return texts(card, []);
  });
}
process.stdout.write(JSON.stringify(result));
