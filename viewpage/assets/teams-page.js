// The view page inside Microsoft Teams (TICKETIQ_TEAMS_TAB). Loaded after
// teams.js (@microsoft/teams-js, bundled into the binary) and before
// page.js. Inside a Teams frame it initializes teams-js, reports success
// to Teams, and reads the Teams context, whose theme and locale become the
// view's host context (window.TeamsbotHost, a promise page.js waits for).
// On the sign-in shell (body data-signin) it signs the person in with
// Teams single sign-on, or with a popup where Teams cannot give a token,
// then loads the page again. Only this page talks to Teams: the view's
// frames are opaque and teams-js drops messages from them.
(function () {
  "use strict";

  // How long Teams has to answer app.initialize before the page goes on
  // without it. Only a framed page asks, and only Teams' hosts may frame
  // it, so the wait is generous: a busy client answers late, not never.
  var INITIALIZE_WAIT_MS = 15000;

  var body = document.body;
  var teams = window.TeamsbotTeams;
  var framed = window.parent !== window;
  var origins = (body.getAttribute("data-teams-origins") || "").split(" ").filter(Boolean);

  function withTimeout(p, ms) {
    return new Promise(function (resolve, reject) {
      var t = setTimeout(function () { reject(new Error("Teams did not answer")); }, ms);
      p.then(function (v) { clearTimeout(t); resolve(v); }, function (e) { clearTimeout(t); reject(e); });
    });
  }

  // Teams' themes are default, dark and contrast; MCP Apps views know
  // light and dark, and high contrast reaches them through the page's
  // style variables as well.
  function viewTheme(t) {
    return t === "dark" || t === "contrast" ? "dark" : "light";
  }

  function applyTheme(t) {
    if (t === "default" || t === "dark" || t === "contrast") {
      document.documentElement.setAttribute("data-theme", t);
    }
  }

  function initialize() {
    if (!framed || !teams) {
      return Promise.reject(new Error("not inside Teams"));
    }
    return withTimeout(teams.app.initialize(origins), INITIALIZE_WAIT_MS);
  }

  function post(path, body) {
    return fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body)
    }).then(function (resp) {
      if (!resp.ok) {
        return resp.json().then(function (j) {
          throw new Error(j && typeof j.error === "string" ? j.error : "HTTP " + resp.status);
        }, function () {
          throw new Error("HTTP " + resp.status);
        });
      }
    });
  }

  // MARKER rides on the page's address after a sign-in, with the time of
  // it: a shell that loads with a recent one was signed in a moment ago and
  // still has no session, so the browser did not keep the cookie in Teams'
  // frame. It says so rather than sign in and reload again and again. An
  // old marker (the session ran out hours later) is ignored.
  var MARKER = "teamsbot-signed-in";
  var MARKER_RECENT_MS = 60000;

  function reloadSignedIn() {
    var u = new URL(location.href);
    u.searchParams.set(MARKER, String(Date.now()));
    location.replace(u.href);
  }

  function justSignedIn() {
    var at = Number(new URL(location.href).searchParams.get(MARKER));
    return isFinite(at) && at > 0 && Math.abs(Date.now() - at) < MARKER_RECENT_MS;
  }

  if (body.hasAttribute("data-signin")) {
    var status = document.getElementById("status");
    var button = document.getElementById("signin");
    var browser = document.getElementById("browser");
    var fresh = new URL(location.href);
    fresh.searchParams.delete(MARKER);
    browser.href = fresh.href;
    if (justSignedIn()) {
      initialize().then(function () { teams.app.notifySuccess(); }, function () {});
      status.textContent = "You were signed in, but this browser did not keep the sign-in inside Teams " +
        "(it blocks the cookies of pages shown in Teams). Open the view in the browser instead.";
      browser.hidden = false;
      return;
    }
    var popup = function () {
      button.disabled = true;
      status.textContent = "Signing you in in a new window\u2026";
      teams.authentication.authenticate({ url: location.origin + "/signin/teams/start", width: 600, height: 600 })
        .then(function (code) { return post("/api/signin/teams/handoff", { code: code }); })
        .then(reloadSignedIn)
        .catch(function (e) {
          button.disabled = false;
          status.textContent = "Sign-in did not finish: " + e.message;
        });
    };
    button.addEventListener("click", popup);
    initialize().then(function () {
      teams.app.notifySuccess();
      return teams.authentication.getAuthToken()
        .then(function (token) { return post("/api/signin/teams", { token: token }); })
        .then(reloadSignedIn);
    }).catch(function (e) {
      // No token (consent missing, a client without single sign-on) or
      // not inside Teams: the person signs in in a popup, which needs
      // their click to open.
      status.textContent = "Teams could not sign you in by itself (" + e.message + "). Sign in to open the view.";
      button.hidden = false;
      browser.hidden = false;
    });
    return;
  }

  window.TeamsbotHost = initialize().then(function () {
    return teams.app.getContext().catch(function () {
      return null;
    }).then(function (ctx) {
      var app = ctx && ctx.app ? ctx.app : {};
      applyTheme(app.theme);
      teams.app.notifySuccess();
      teams.app.registerOnThemeChangeHandler(function (t) {
        applyTheme(t);
        if (window.TeamsbotHostChanged) {
          window.TeamsbotHostChanged({ theme: viewTheme(t) });
        }
      });
      var host = { theme: viewTheme(app.theme) };
      if (typeof app.locale === "string" && app.locale !== "") {
        host.locale = app.locale;
      }
      return host;
    });
  }).catch(function () {
    // Outside Teams (the browser fallback) the page is the ordinary one.
    return null;
  });
})();
