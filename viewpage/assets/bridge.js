// The host side of MCP Apps, shared by every page that shows views: the view
// page and the playground. A page frames the sandbox proxy
// (sandbox="allow-scripts", opaque origin), which frames the view and relays
// its JSON-RPC messages. This script answers them: it trusts a message only
// when it comes from the proxy frame's window (event.source), does the view's
// tool calls with the person's session, and never hands anything the view
// says to the model. It defines one global, TeamsbotBridge, whose mount
// shows a view.
(function () {
  "use strict";

  var PROTOCOL_VERSION = "2026-01-26";
  var SANDBOX_PREFIX = "ui/notifications/sandbox-";
  // Height limits for ui/notifications/size-changed. The width is never
  // taken from the view: it follows the page, so a view that sizes itself
  // from its width cannot start a feedback loop.
  var MIN_HEIGHT = 60;
  var MAX_HEIGHT = 3000;
  // Limits of what ui/message may put on the page: a view that talks
  // without end keeps only its latest messages, each cut to a readable
  // length, and cannot grow the page without bound.
  var MAX_MESSAGES = 50;
  var MAX_MESSAGE_CHARS = 4000;
  // How long a view has to answer ui/resource-teardown before its frames
  // are removed anyway: long enough to save its state, short enough that
  // closing never seems to hang.
  var TEARDOWN_WAIT_MS = 1000;
  // The notification the guard in a view document posts when the view
  // tried a closed channel, and how many such reports one view may make.
  var BLOCKED = "teamsbot/notifications/blocked";
  var MAX_BLOCKED = 20;
  // The header with which a call says that the page shows what the
  // server asks during it (viewpage.QuestionsHeader).
  var QUESTIONS_HEADER = "Teamsbot-Questions";

  // JSON-RPC error codes.
  var METHOD_NOT_FOUND = -32601;
  var INVALID_PARAMS = -32602;
  var INTERNAL_ERROR = -32603;
  var SERVER_ERROR = -32000;

  // mount shows one view in o.box and answers its messages. o.api is the
  // view's API path (/api/mcp-apps/{id}); o.hostInfo is {name, version};
  // o.hostContext, when set, is {theme, locale} from the page's own host
  // (Teams), which the view's host context takes over the browser's;
  // o.frameId, when set, is the proxy frame's id;
  // o.status, o.messages and o.messageList are the elements that show the
  // state of the view and what it says with ui/message (o.messages is
  // unhidden on the first message); o.questions, when set, shows what a
  // server asks the person during the view's tools/call, in the page
  // (questions.js): each call then says so to the service and tells
  // o.questions.callStarted, whose returned function it calls when the
  // call ends. Nothing of a question reaches the view. Each mounted view has its own frame
  // and listener, so a page can show several. mount returns the view's
  // handle: teardown(reason) asks the view to end (ui/resource-teardown),
  // waits briefly for its answer, then removes its frames and listener; it
  // returns a promise that resolves once they are gone. hostContextChanged
  // passes a new theme on to the view.
  function mount(o) {
    var api = o.api;
    var hostInfo = o.hostInfo;
    var box = o.box;
    var statusEl = o.status;
    var messages = o.messages;
    var messageList = o.messageList;

    var view = null; // the answer of GET /api/mcp-apps/{id}
    var frame = null; // the proxy frame
    var viewLoaded = false;
    var initialized = false; // the view sent ui/notifications/initialized
    var teardownId = null; // the id of our ui/resource-teardown, once sent
    var teardownDone = null; // resolves the pending teardown
    var gone = false; // the frames were removed

    function setStatus(text) {
      statusEl.textContent = text;
    }

    function isObject(m) {
      return m !== null && typeof m === "object" && !Array.isArray(m);
    }

    function post(msg) {
      if (frame && frame.contentWindow) {
        // The proxy's origin is opaque, so "*" is the only target that
        // reaches it; the message goes to that one window only.
        frame.contentWindow.postMessage(msg, "*");
      }
    }

    function reply(id, result) {
      post({ jsonrpc: "2.0", id: id, result: result });
    }

    function fail(id, code, message) {
      post({ jsonrpc: "2.0", id: id, error: { code: code, message: message } });
    }

    function notify(method, params) {
      post({ jsonrpc: "2.0", method: method, params: params });
    }

    function cssVariables() {
      var names = [
        "--color-background-primary", "--color-background-secondary",
        "--color-text-primary", "--color-text-secondary",
        "--color-border-primary", "--font-sans", "--font-mono",
        "--border-radius-sm", "--border-radius-md"
      ];
      var style = getComputedStyle(document.documentElement);
      var out = {};
      for (var i = 0; i < names.length; i++) {
        var v = style.getPropertyValue(names[i]).trim();
        if (v) {
          out[names[i]] = v;
        }
      }
      return out;
    }

    function hostContext() {
      var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
      var tz = "UTC";
      try {
        tz = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
      } catch (e) {}
      return {
        theme: dark ? "dark" : "light",
        locale: navigator.language || "en",
        timeZone: tz,
        displayMode: "inline",
        availableDisplayModes: ["inline"],
        platform: "web",
        containerDimensions: { maxWidth: Math.round(box.clientWidth), maxHeight: MAX_HEIGHT },
        styles: { variables: cssVariables() }
      };
    }

    // fullHostContext is hostContext with what the page's host said (the
    // Teams theme and locale inside Teams) in place of the browser's.
    function fullHostContext() {
      var ctx = hostContext();
      var given = isObject(o.hostContext) ? o.hostContext : {};
      if (given.theme === "light" || given.theme === "dark") {
        ctx.theme = given.theme;
      }
      if (typeof given.locale === "string" && given.locale !== "") {
        ctx.locale = given.locale;
      }
      return ctx;
    }

    function hostCapabilities() {
      // The view gets scripts, forms only when its server asked, and
      // camera, microphone, geolocation or clipboard writing only where
      // they were allowed for its server: the permissions say exactly what
      // was granted, and the frames' allow attribute grants no more.
      var permissions = {};
      var names = ["camera", "microphone", "geolocation", "clipboardWrite", "forms"];
      for (var i = 0; i < names.length; i++) {
        if (view.permissions && view.permissions[names[i]] === true) {
          permissions[names[i]] = {};
        }
      }
      return {
        openLinks: {},
        serverTools: {},
        logging: {},
        message: { text: {} },
        sandbox: { permissions: permissions }
      };
    }

    function initializeResult() {
      return {
        protocolVersion: PROTOCOL_VERSION,
        hostInfo: hostInfo,
        hostCapabilities: hostCapabilities(),
        hostContext: fullHostContext()
      };
    }

    function toolResult() {
      var r = isObject(view.result) ? view.result : {};
      if (!Array.isArray(r.content)) {
        r.content = [];
      }
      return r;
    }

    function callTool(id, params) {
      if (!isObject(params) || typeof params.name !== "string" || params.name === "") {
        fail(id, INVALID_PARAMS, "tools/call needs a tool name");
        return;
      }
      var args = params.arguments === undefined ? {} : params.arguments;
      var headers = { "Content-Type": "application/json" };
      var ended = null;
      if (o.questions) {
        headers[QUESTIONS_HEADER] = "page";
        ended = o.questions.callStarted();
      }
      var end = function () {
        if (ended) {
          ended();
          ended = null;
        }
      };
      fetch(api + "/call", {
        method: "POST",
        credentials: "same-origin",
        headers: headers,
        body: JSON.stringify({ name: params.name, arguments: args })
      }).then(function (resp) {
        return resp.json().then(function (j) {
          end();
          if (resp.ok) {
            reply(id, j);
            return;
          }
          var msg = isObject(j) && typeof j.error === "string" ? j.error : "HTTP " + resp.status;
          fail(id, resp.status >= 500 ? INTERNAL_ERROR : SERVER_ERROR, msg);
        });
      }).catch(function () {
        end();
        fail(id, INTERNAL_ERROR, "the tool call did not reach the service");
      });
    }

    function openLink(id, params) {
      var url;
      try {
        url = new URL(String(isObject(params) ? params.url : ""));
      } catch (e) {
        fail(id, INVALID_PARAMS, "not a URL");
        return;
      }
      if (url.protocol !== "https:") {
        fail(id, INVALID_PARAMS, "only https:// links can be opened");
        return;
      }
      window.open(url.href, "_blank", "noopener,noreferrer");
      reply(id, {});
    }

    function showMessage(id, params) {
      var content = isObject(params) && Array.isArray(params.content) ? params.content : [];
      var li = document.createElement("li");
      var parts = [];
      for (var i = 0; i < content.length; i++) {
        var c = content[i];
        if (isObject(c) && c.type === "text" && typeof c.text === "string") {
          parts.push(c.text);
        } else if (isObject(c) && typeof c.type === "string") {
          parts.push("[" + c.type + "]");
        }
      }
      var text = parts.join("\n");
      if (text.length > MAX_MESSAGE_CHARS) {
        text = text.slice(0, MAX_MESSAGE_CHARS) + "\u2026";
      }
      // textContent, never innerHTML: what a view says is shown as text.
      li.textContent = text;
      messageList.appendChild(li);
      while (messageList.children.length > MAX_MESSAGES) {
        messageList.removeChild(messageList.firstElementChild);
      }
      messages.hidden = false;
      reply(id, {});
    }

    function resize(params) {
      if (!isObject(params)) {
        return;
      }
      var h = params.height;
      if (typeof h !== "number" || !isFinite(h) || h < 0) {
        return;
      }
      h = Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, Math.ceil(h)));
      // Only a real change is applied, so an answer to our own resize does
      // not resize again.
      if (frame.style.height === h + "px") {
        return;
      }
      frame.style.height = h + "px";
    }

    // reportBlocked records a closed channel the view tried (the guard in
    // the view, or the proxy, said which): once per channel and source,
    // and at most MAX_BLOCKED reports per view, with the view's frame
    // token. A token older than its 10 minutes is refused; the page then
    // asks the view API for a fresh one, once.
    var blockedSent = Object.create(null);
    var blockedCount = 0;
    function reportBlocked(params, source) {
      if (!isObject(params) || typeof params.channel !== "string" || params.channel.length > 40) {
        return;
      }
      var key = source + " " + params.channel;
      if (blockedSent[key] === true || blockedCount >= MAX_BLOCKED) {
        return;
      }
      blockedSent[key] = true;
      blockedCount++;
      sendBlocked(params.channel, source, false);
    }

    function sendBlocked(channel, source, again) {
      var token = "";
      try {
        token = new URL(view.viewUrl, window.location.href).searchParams.get("token") || "";
      } catch (e) {}
      fetch(api + "/blocked", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ channel: channel, source: source, token: token })
      }).then(function (resp) {
        if (resp.status !== 403 || again) {
          return;
        }
        return fetch(api, { credentials: "same-origin", headers: { Accept: "application/json" } })
          .then(function (r) { return r.ok ? r.json() : null; })
          .then(function (fresh) {
            if (isObject(fresh) && typeof fresh.viewUrl === "string") {
              view.viewUrl = fresh.viewUrl;
              sendBlocked(channel, source, true);
            }
          });
      }).catch(function () {});
    }

    function onRequest(m) {
      switch (m.method) {
        case "ui/initialize":
          reply(m.id, initializeResult());
          return;
        case "tools/call":
          callTool(m.id, m.params);
          return;
        case "ui/open-link":
          openLink(m.id, m.params);
          return;
        case "ui/message":
          showMessage(m.id, m.params);
          return;
        default:
          fail(m.id, METHOD_NOT_FOUND, "method not found: " + String(m.method).slice(0, 100));
      }
    }

    function onNotification(m) {
      switch (m.method) {
        case SANDBOX_PREFIX + "proxy-ready":
          if (!viewLoaded) {
            viewLoaded = true;
            notify(SANDBOX_PREFIX + "resource-ready", {
              url: view.viewUrl,
              sandbox: view.sandbox,
              allow: view.allow || "",
              title: view.toolTitle || view.tool
            });
          }
          return;
        case "ui/notifications/initialized":
          initialized = true;
          notify("ui/notifications/tool-input", { arguments: isObject(view.arguments) ? view.arguments : {} });
          notify("ui/notifications/tool-result", toolResult());
          setStatus("");
          return;
        case "ui/notifications/size-changed":
          resize(m.params);
          return;
        case BLOCKED:
          reportBlocked(m.params, "view");
          return;
        case SANDBOX_PREFIX + "blocked":
          // Only the proxy can send this: it drops whatever the view sends
          // under the sandbox prefix.
          reportBlocked(m.params, "proxy");
          return;
        default:
          // Other notifications (notifications/message, request-teardown)
          // need no answer.
          return;
      }
    }

    function onMessage(event) {
      if (!frame || event.source !== frame.contentWindow) {
        return;
      }
      var m = event.data;
      if (isObject(m) && m.jsonrpc === "2.0" && teardownId !== null && m.id === teardownId &&
          typeof m.method !== "string" && ("result" in m || "error" in m)) {
        // The view's answer to ui/resource-teardown, the page's only
        // request: it is ready to go.
        if (teardownDone) {
          teardownDone();
        }
        return;
      }
      if (!isObject(m) || m.jsonrpc !== "2.0" || typeof m.method !== "string") {
        return; // not a request or a notification
      }
      if (!("id" in m)) {
        onNotification(m);
        return;
      }
      if (typeof m.id !== "string" && typeof m.id !== "number") {
        return;
      }
      onRequest(m);
    }

    function start(v) {
      view = v;
      frame = document.createElement("iframe");
      frame.className = "proxy";
      if (o.frameId) {
        frame.id = o.frameId;
      }
      // The same sandbox as the view's own frame: allow-scripts, plus
      // allow-forms only when the view's server asked for forms. A frame
      // inherits its parent's sandbox flags, so forms granted to the view
      // alone would stay blocked behind a proxy frame without them.
      frame.setAttribute("sandbox", v.sandbox === "allow-scripts allow-forms" ? v.sandbox : "allow-scripts");
      frame.setAttribute("referrerpolicy", "no-referrer");
      // The granted Permissions Policy features, with no origin list: a
      // feature then goes only to the origin the frame was loaded from,
      // not to wherever the frame navigates later.
      if (typeof v.allow === "string" && v.allow !== "") {
        frame.setAttribute("allow", v.allow);
      }
      frame.setAttribute("title", v.toolTitle || v.tool);
      if (v.prefersBorder === false) {
        box.classList.add("borderless");
      }
      box.appendChild(frame);
      // The listener is attached before src is set, so the proxy's first
      // message cannot be missed.
      window.addEventListener("message", onMessage);
      frame.src = v.proxyUrl;
    }

    // remove takes the view's frames and listener away.
    function remove() {
      if (gone) {
        return;
      }
      gone = true;
      window.removeEventListener("message", onMessage);
      if (frame && frame.parentNode) {
        frame.parentNode.removeChild(frame);
      }
      frame = null;
    }

    // sendTeardown sends ui/resource-teardown once, to an initialized view
    // only: before initialized nothing goes to the view. It reports whether
    // an answer is to be awaited.
    function sendTeardown(reason) {
      if (teardownId !== null) {
        return true;
      }
      if (!initialized || !frame) {
        return false;
      }
      teardownId = "teamsbot-teardown-" + Math.random().toString(36).slice(2);
      post({ jsonrpc: "2.0", id: teardownId, method: "ui/resource-teardown", params: { reason: reason } });
      return true;
    }

    var closing = null;
    function teardown(reason) {
      if (closing) {
        return closing;
      }
      closing = new Promise(function (resolve) {
        var finish = function () {
          teardownDone = null;
          remove();
          resolve();
        };
        if (!sendTeardown(String(reason || "closed"))) {
          finish();
          return;
        }
        teardownDone = finish;
        setTimeout(function () {
          if (teardownDone === finish) {
            finish();
          }
        }, TEARDOWN_WAIT_MS);
      });
      return closing;
    }

    // Navigating away: the page cannot wait, so the view is told and the
    // browser removes the frames with the page. beforeunload comes first,
    // while the frames still run and can take the message; pagehide is
    // the one every browser fires (sendTeardown sends once).
    var leaving = function () {
      if (!gone) {
        sendTeardown("the page was closed");
      }
    };
    window.addEventListener("beforeunload", leaving);
    window.addEventListener("pagehide", leaving);

    setStatus("Loading the view…");
    fetch(api, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (resp) {
        return resp.json().then(function (j) {
          if (!resp.ok) {
            throw new Error(isObject(j) && typeof j.error === "string" ? j.error : "HTTP " + resp.status);
          }
          return j;
        });
      })
      .then(function (v) {
        if (!closing) {
          start(v);
        }
      })
      .catch(function (e) {
        setStatus("The view could not be loaded: " + e.message);
      });
    // hostContextChanged tells an initialized view that the host's theme
    // changed (ui/notifications/host-context-changed), with the page's
    // style variables, which follow the theme.
    function hostContextChanged(changed) {
      if (!isObject(changed) || (changed.theme !== "light" && changed.theme !== "dark")) {
        return;
      }
      if (isObject(o.hostContext)) {
        o.hostContext.theme = changed.theme;
      }
      if (initialized && !gone) {
        notify("ui/notifications/host-context-changed", { theme: changed.theme, styles: { variables: cssVariables() } });
      }
    }

    return Object.freeze({ teardown: teardown, hostContextChanged: hostContextChanged });
  }

  window.TeamsbotBridge = Object.freeze({ mount: mount });
})();
