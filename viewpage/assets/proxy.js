// The sandbox proxy. It runs in a frame with sandbox="allow-scripts" and no
// allow-same-origin, so its origin is opaque: it has no cookies, no storage
// and no access to the page. It frames the view's own document and relays
// JSON-RPC messages between that frame and the page, trusting a message only
// by the window it came from (event.source), never by its origin, because
// both origins are opaque.
(function () {
  "use strict";

  // The only sandbox values the page may ask for: the seed grants scripts,
  // and forms only when the server asked for them.
  var ALLOWED_SANDBOX = { "allow-scripts": true, "allow-scripts allow-forms": true };
  // The only Permissions Policy features the page may delegate to the
  // view, each at most once, separated by "; ". The page grants them only
  // where allowed for the view's server; this frame was given the same.
  var ALLOWED_FEATURES = { "camera": true, "microphone": true, "geolocation": true, "clipboard-write": true };

  // allowOf checks the page's allow attribute for the view; null refuses.
  function allowOf(allow) {
    if (allow === undefined || allow === "") {
      return "";
    }
    if (typeof allow !== "string") {
      return null;
    }
    var seen = {};
    var parts = allow.split("; ");
    for (var i = 0; i < parts.length; i++) {
      if (!Object.prototype.hasOwnProperty.call(ALLOWED_FEATURES, parts[i]) || seen[parts[i]]) {
        return null;
      }
      seen[parts[i]] = true;
    }
    return allow;
  }
  var PREFIX = "ui/notifications/sandbox-";
  var here = new URL(window.location.href);
  var inner = null;

  function isObject(m) {
    return m !== null && typeof m === "object" && !Array.isArray(m);
  }

  // loadView creates the view's frame. The message listener below is
  // already attached when src is set, so no early message is lost.
  function loadView(params) {
    if (inner || !isObject(params)) {
      return;
    }
    var url;
    try {
      // A path is resolved against this document: without a separate
      // sandbox origin the page hands over paths, not whole URLs.
      url = new URL(String(params.url), here.href);
    } catch (e) {
      return;
    }
    // Only this sandbox origin's view documents, never another site.
    if (url.origin !== here.origin || url.pathname.indexOf("/sandbox/views/") !== 0) {
      return;
    }
    if (!Object.prototype.hasOwnProperty.call(ALLOWED_SANDBOX, params.sandbox)) {
      return;
    }
    var allow = allowOf(params.allow);
    if (allow === null) {
      return;
    }
    inner = document.createElement("iframe");
    inner.setAttribute("sandbox", params.sandbox);
    if (allow !== "") {
      inner.setAttribute("allow", allow);
    }
    inner.setAttribute("referrerpolicy", "no-referrer");
    inner.setAttribute("title", typeof params.title === "string" ? params.title : "view");
    inner.id = "view";
    document.body.appendChild(inner);
    inner.src = url.href;
  }

  window.addEventListener("message", function (event) {
    var m = event.data;
    if (window.parent !== window && event.source === window.parent) {
      if (isObject(m) && m.method === PREFIX + "resource-ready") {
        loadView(m.params);
        return;
      }
      if (inner && inner.contentWindow) {
        inner.contentWindow.postMessage(m, "*");
      }
      return;
    }
    if (inner && event.source === inner.contentWindow) {
      // The view may not speak for the proxy.
      if (isObject(m) && typeof m.method === "string" && m.method.indexOf(PREFIX) === 0) {
        return;
      }
      window.parent.postMessage(m, "*");
    }
    // Anything else (the view posting to window.top skips us anyway, a
    // grandchild frame, another tab) is dropped.
  });

  // A request this document's own CSP refused (the view's frame sent
  // somewhere other than a view document) is a closed channel the view
  // tried: the page records it, by the directive's name only.
  var reported = Object.create(null);
  document.addEventListener("securitypolicyviolation", function (e) {
    var d = String(e.effectiveDirective);
    if (window.parent === window || reported[d] === true) {
      return;
    }
    reported[d] = true;
    window.parent.postMessage({ jsonrpc: "2.0", method: PREFIX + "blocked", params: { channel: d } }, "*");
  });

  if (window.parent !== window) {
    window.parent.postMessage({ jsonrpc: "2.0", method: PREFIX + "proxy-ready", params: {} }, "*");
  }
})();
