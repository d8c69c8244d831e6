// The part of @fluentui/web-components (npm, pinned in package-lock.json)
// that the service's pages use, bundled by build.mjs into fluent.js: the
// components the pages show, the theme, and the confirmation of
// destructive forms. Every page works without it: the forms are native
// ones that fluent.css styles with the same tokens.
import { Button, ButtonDefinition, Dialog, DialogDefinition, DialogBody, DialogBodyDefinition, setTheme } from "@fluentui/web-components";
import { teamsDarkTheme, teamsHighContrastTheme, teamsLightTheme, webDarkTheme, webLightTheme } from "@fluentui/tokens";

Button.define(ButtonDefinition);
Dialog.define(DialogDefinition);
DialogBody.define(DialogBodyDefinition);

// The theme: inside Teams, Teams' own (the page's Teams script writes the
// theme of the Teams context, and of every later change, to html
// data-theme); elsewhere Fluent's web theme of the system's colour
// scheme. Forced colours (Windows high contrast) override the colours of
// the page and of the components alike, which are drawn for it.
const root = document.documentElement;
const dark = window.matchMedia("(prefers-color-scheme: dark)");
const teamsThemes = { default: teamsLightTheme, dark: teamsDarkTheme, contrast: teamsHighContrastTheme };
function applyTheme() {
  setTheme(teamsThemes[root.getAttribute("data-theme")] || (dark.matches ? webDarkTheme : webLightTheme));
}
applyTheme();
dark.addEventListener("change", applyTheme);
new MutationObserver(applyTheme).observe(root, { attributes: true, attributeFilter: ["data-theme"] });

// A form with data-confirm asks in a dialog before it posts, saying what
// will stop working (the attribute's text); confirmed, it posts with
// confirm=yes, which the server requires. Without the script the server
// answers the unconfirmed post with a page that asks the same.
let dialog = null;
function confirmDialog() {
  if (dialog) {
    return dialog;
  }
  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      e.setAttribute(k, v);
    }
    if (text) {
      e.textContent = text;
    }
    return e;
  };
  const d = el("fluent-dialog", { id: "confirm-dialog", type: "modal", "aria-labelledby": "confirm-title", "aria-describedby": "confirm-text" });
  const body = el("fluent-dialog-body");
  const title = el("h2", { slot: "title", id: "confirm-title" });
  const text = el("p", { id: "confirm-text" });
  const cancel = el("fluent-button", { slot: "action", id: "confirm-cancel" }, "Cancel");
  const ok = el("fluent-button", { slot: "action", id: "confirm-ok", appearance: "primary" });
  body.append(title, text, cancel, ok);
  d.append(body);
  document.body.append(d);
  dialog = { d, title, text, cancel, ok, form: null, submitter: null };
  cancel.addEventListener("click", () => d.hide());
  ok.addEventListener("click", () => {
    const { form, submitter } = dialog;
    dialog.form = null;
    d.hide();
    if (!form) {
      return;
    }
    let field = form.querySelector('input[name="confirm"]');
    if (!field) {
      field = el("input", { type: "hidden", name: "confirm" });
      form.append(field);
    }
    field.value = "yes";
    form.requestSubmit(submitter && submitter.form === form ? submitter : undefined);
    // The post carries it now; the form, if the page is shown again (the
    // back button), asks again.
    field.value = "";
  });
  d.addEventListener("toggle", (e) => {
    if (e.detail && e.detail.newState === "closed" && dialog.submitter && dialog.submitter.isConnected) {
      dialog.submitter.focus();
    }
  });
  return dialog;
}

document.addEventListener("submit", (e) => {
  const form = e.target;
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-confirm")) {
    return;
  }
  const field = form.querySelector('input[name="confirm"]');
  if (field && field.value === "yes") {
    return;
  }
  e.preventDefault();
  const c = confirmDialog();
  c.form = form;
  c.submitter = e.submitter || null;
  c.title.textContent = form.getAttribute("data-confirm-title") || "Are you sure?";
  c.text.textContent = form.getAttribute("data-confirm");
  c.ok.textContent = form.getAttribute("data-confirm-action") || (e.submitter ? e.submitter.textContent : "Continue");
  c.d.show();
  c.cancel.focus();
});
