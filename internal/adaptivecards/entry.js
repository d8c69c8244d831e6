// The part of Microsoft's Adaptive Cards renderer (npm adaptivecards,
// pinned in package-lock.json) that the playground uses, bundled by
// build.mjs into cards.js. It defines one global, TeamsbotCards:
//
//	TeamsbotCards.render(card, {theme, onAction, problems}) → element
//	TeamsbotCards.check(card) → [problem, ...]
//
// render lays a card out with Teams' host configuration (theme "light" or
// "dark") and returns a div.ac-card holding it. Action.OpenUrl opens its
// https, http or mailto address in a new window; Action.ShowCard and
// Action.ToggleVisibility are the renderer's own; every other action
// (Action.Submit, Action.Execute) goes to onAction({type, title, data}).
// What the renderer reports while parsing the card (as Teams' client
// parses it, schema 1.5) and validating it is appended to problems, when
// given, and written to the console as a warning.
import * as AC from "adaptivecards";
import { teamsDark, teamsLight } from "./hostconfig.js";
import { markdown, safeURL } from "./markdown.js";

AC.AdaptiveCard.onProcessMarkdown = function (text, result) {
  result.outputHtml = markdown(text);
  result.didProcess = true;
};

const hostConfigs = { light: new AC.HostConfig(teamsLight), dark: new AC.HostConfig(teamsDark) };

// parse reads a card as Teams' desktop and web clients do (1.5), and
// returns it with what the parse and the validation reported.
function parse(json, hostConfig) {
  const card = new AC.AdaptiveCard();
  if (hostConfig) {
    card.hostConfig = hostConfig;
  }
  const context = new AC.SerializationContext(AC.Versions.v1_5);
  card.parse(json, context);
  const problems = [];
  for (let i = 0; i < context.eventCount; i++) {
    const e = context.getEventAt(i);
    problems.push("parse: " + AC.ValidationEvent[e.event] + ": " + e.message);
  }
  for (const e of card.validateProperties().validationEvents) {
    problems.push("validate: " + AC.ValidationEvent[e.event] + ": " + e.message);
  }
  return { card: card, problems: problems };
}

function check(json) {
  return parse(json).problems;
}

// Every card on the page gets its own prefix for the ids of its elements,
// so that two cards with an element of one id (two answers with run
// notes) keep distinct ids and aria-controls in the page.
let cards = 0;

function uniqueIDs(root, prefix) {
  const renamed = {};
  for (const e of root.querySelectorAll("[id]")) {
    renamed[e.id] = prefix + e.id;
    e.setAttribute("data-ac-id", e.id);
    e.id = prefix + e.id;
  }
  for (const e of root.querySelectorAll("[aria-controls]")) {
    const ids = e.getAttribute("aria-controls").split(/\s+/).map((id) => renamed[id] || id);
    e.setAttribute("aria-controls", ids.join(" "));
  }
}

function render(json, opts) {
  opts = opts || {};
  const theme = opts.theme === "dark" ? "dark" : "light";
  const box = document.createElement("div");
  box.className = "ac-card";
  box.setAttribute("data-theme", theme);
  const parsed = parse(json, hostConfigs[theme]);
  const card = parsed.card;
  card.onExecuteAction = function (action) {
    if (action instanceof AC.OpenUrlAction) {
      const href = safeURL(action.url);
      if (href) {
        window.open(href, "_blank", "noopener,noreferrer");
      }
      return;
    }
    if (action instanceof AC.ToggleVisibilityAction || action instanceof AC.ShowCardAction) {
      return;
    }
    if (opts.onAction) {
      opts.onAction({ type: action.getJsonTypeName(), title: action.title, data: action.data });
    }
  };
  let el;
  try {
    el = card.render();
  } catch (e) {
    parsed.problems.push("render: " + e.message);
  }
  if (el) {
    cards++;
    uniqueIDs(el, "ac" + cards + "-");
    box.appendChild(el);
  } else {
    box.classList.add("ac-unsupported");
    box.textContent = "This card cannot be shown.";
  }
  if (parsed.problems.length > 0) {
    if (Array.isArray(opts.problems)) {
      opts.problems.push(...parsed.problems);
    }
    console.warn("Adaptive Card: " + parsed.problems.join("; "));
  }
  return box;
}

window.TeamsbotCards = Object.freeze({ render: render, check: check });
