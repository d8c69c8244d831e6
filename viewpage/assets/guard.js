// The guard: the first script of every view document (the service inserts
// it after the doctype of the view's HTML as served; the stored HTML and its
// SHA-256 are the server's, unchanged) and of every srcdoc frame the view
// makes. It closes what the view's CSP cannot: CSP has no directive that
// Chromium applies to WebRTC (CSP3's webrtc 'block' is not implemented), so
// an RTCPeerConnection could send a TURN username, or a host name, that a
// script chose. The guard makes every constructor of a peer connection
// throw, for good: the replacements are non-configurable accessors on the
// window, so neither delete, Object.defineProperty nor Reflect brings the
// original back, and the original prototypes' methods throw too. A fresh
// realm is out of reach: the view's frame is sandboxed without
// allow-same-origin, so every frame inside it has an opaque origin of its
// own (contentWindow, frames[0] and window[0] of an about:blank child are
// cross-origin), window.open has no allow-popups, and workers have no
// RTCPeerConnection. What remains is a srcdoc frame, whose own scripts run
// in a new window: the guard puts itself first in the srcdoc of every frame
// it can find (in the document and in every shadow root made by script)
// before the frame's navigation can commit; script cannot make a
// declarative shadow root (setHTMLUnsafe parses as innerHTML does), and a
// frame of the document tree the guard did not find is navigated to
// about:blank. Out of its reach is only a srcdoc frame inside a closed
// declarative shadow root written in the view's own HTML: no script can
// see it, and frames of shadow trees are not in window.frames.
//
// It also reports a closed channel the view tried: its own replacements
// being called, a CSP violation in the document, and a Connection-Allowlist
// report. Each is posted once per document to the parent (the sandbox
// proxy, which relays it to the page) as a JSON-RPC notification that names
// the channel only, never a URL or any data; the page records it in the
// audit log. Anything the guard posts the view could post too, so the
// service accepts only channel names it knows and limits how many it keeps.
//
// Every built-in it uses is taken before the view's own scripts run and
// called through the captured Reflect.apply, so a view that replaces
// Function.prototype.call, a getter or an array method changes nothing here.
(function () {
  "use strict";
  var win = window;
  var doc = document;
  var O = Object;
  var apply = Reflect.apply;
  var defineProperty = O.defineProperty;
  var getOwnPropertyDescriptor = O.getOwnPropertyDescriptor;
  var getOwnPropertyNames = O.getOwnPropertyNames;
  var getPrototypeOf = O.getPrototypeOf;
  var create = O.create;
  var DOMExc = win.DOMException;
  var MO = win.MutationObserver;
  var RO = win.ReportingObserver;

  // getter finds the getter of an accessor on an object or its prototypes.
  function getter(obj, name) {
    for (var o = obj; o; o = getPrototypeOf(o)) {
      var d = getOwnPropertyDescriptor(o, name);
      if (d) {
        return d.get;
      }
    }
    return undefined;
  }
  function method(proto, name) {
    var d = proto && getOwnPropertyDescriptor(proto, name);
    return d && d.value;
  }

  var parentWin = win.parent;
  var parentPost = parentWin !== win ? parentWin.postMessage : null;
  var lengthOf = getter(win, "length");
  var addEventListener = method(win.EventTarget.prototype, "addEventListener");
  var getAttribute = method(win.Element.prototype, "getAttribute");
  var setAttribute = method(win.Element.prototype, "setAttribute");
  var hasAttribute = method(win.Element.prototype, "hasAttribute");
  var startsWith = method(win.String.prototype, "startsWith");
  var docQuery = method(win.Document.prototype, "querySelectorAll");
  var fragQuery = method(win.DocumentFragment.prototype, "querySelectorAll");
  var listLength = getter(win.NodeList.prototype, "length");
  var iframeWindow = getter(win.HTMLIFrameElement.prototype, "contentWindow");
  var frameWindow = win.HTMLFrameElement ? getter(win.HTMLFrameElement.prototype, "contentWindow") : iframeWindow;
  var localName = getter(win.Element.prototype, "localName");
  var observe = MO ? method(MO.prototype, "observe") : null;
  var eventSource = getter(win.MessageEvent.prototype, "source");
  var eventData = getter(win.MessageEvent.prototype, "data");
  var violatedDirective = win.SecurityPolicyViolationEvent ? getter(win.SecurityPolicyViolationEvent.prototype, "effectiveDirective") : null;

  var METHOD = "teamsbot/notifications/blocked";
  // The CSP directives whose violation is a channel the view tried.
  var DIRECTIVES = create(null);
  var names = ["default-src", "connect-src", "img-src", "script-src", "script-src-elem", "style-src", "style-src-elem",
    "font-src", "media-src", "frame-src", "child-src", "fenced-frame-src", "worker-src", "manifest-src", "object-src",
    "form-action", "base-uri"];
  for (var n = 0; n < names.length; n++) {
    DIRECTIVES[names[n]] = true;
  }

  var reported = create(null);
  function report(channel) {
    if (reported[channel] === true) {
      return;
    }
    reported[channel] = true;
    if (parentPost) {
      try {
        apply(parentPost, parentWin, [{ jsonrpc: "2.0", method: METHOD, params: { channel: channel } }, "*"]);
      } catch (e) {}
    }
  }

  // The peer connection constructors, made to throw. The message says what
  // happened and is all a view learns.
  function blocked() {
    report("webrtc");
    throw new DOMExc("WebRTC is turned off for views: a view reaches only what its server declared.", "NotAllowedError");
  }
  O.freeze(blocked);
  var rtc = ["RTCPeerConnection", "webkitRTCPeerConnection", "RTCIceTransport", "RTCDataChannel", "RTCSctpTransport", "RTCDtlsTransport"];
  for (var r = 0; r < rtc.length; r++) {
    var C = win[rtc[r]];
    if (typeof C === "function" && C.prototype) {
      var proto = C.prototype;
      var keys = getOwnPropertyNames(proto);
      for (var k = 0; k < keys.length; k++) {
        var d = getOwnPropertyDescriptor(proto, keys[k]);
        if (d && typeof d.value === "function" && d.configurable) {
          defineProperty(proto, keys[k], { value: blocked, writable: false, enumerable: false, configurable: false });
        }
      }
    }
    var own = getOwnPropertyDescriptor(win, rtc[r]);
    if (typeof C === "function" && (!own || own.configurable)) {
      // An accessor whose setter does nothing: a library that assigns
      // window.RTCPeerConnection in strict mode does not fail to load, and
      // what it assigned is never what a view reads back.
      defineProperty(win, rtc[r], { get: function () { return blocked; }, set: function () {}, enumerable: false, configurable: false });
    }
  }

  // Frames: srcdoc gets the guard first; a frame the guard cannot find is
  // emptied.
  var self = doc.currentScript;
  var TAG = self ? "<script>" + self.textContent + "<\/script>" : "";
  var roots = create(null);
  var rootCount = 0;
  var opts = { childList: true, subtree: true, attributes: true, attributeFilter: ["srcdoc"] };
  var mo = null;

  // guardFrame puts the guard first in a frame's srcdoc and adds its
  // window to known. One frame that fails stops no other.
  function guardFrame(el, known) {
    try {
      if (apply(hasAttribute, el, ["srcdoc"])) {
        var s = apply(getAttribute, el, ["srcdoc"]);
        if (TAG !== "" && !apply(startsWith, s, [TAG])) {
          apply(setAttribute, el, ["srcdoc", TAG + s]);
        }
      }
      var w = apply(apply(localName, el, []) === "iframe" ? iframeWindow : frameWindow, el, []);
      if (w) {
        known[known.n++] = w;
      }
    } catch (e) {}
  }
  function scan(list, known) {
    var len = apply(listLength, list, []);
    for (var i = 0; i < len; i++) {
      guardFrame(list[i], known);
    }
  }
  function check() {
    listen();
    // The windows of the frames found, as {0: w, 1: w, ..., n}: an object
    // without a prototype, which no setter a view defines can reach.
    var known = create(null);
    known.n = 0;
    scan(apply(docQuery, doc, ["iframe, frame"]), known);
    for (var i = 0; i < rootCount; i++) {
      scan(apply(fragQuery, roots[i], ["iframe, frame"]), known);
    }
    var frames = apply(lengthOf, win, []);
    if (frames > known.n) {
      for (var f = 0; f < frames; f++) {
        var w = win[f];
        var seen = false;
        for (var j = 0; j < known.n; j++) {
          if (known[j] === w) {
            seen = true;
            break;
          }
        }
        if (!seen && w) {
          try {
            w.location.replace("about:blank");
          } catch (e) {}
        }
      }
    }
  }
  function watch(root) {
    roots[rootCount++] = root;
    if (mo) {
      apply(observe, mo, [root, opts]);
    }
  }
  if (MO) {
    mo = new MO(check);
    apply(observe, mo, [doc, opts]);
  }
  var attachShadow = method(win.Element.prototype, "attachShadow");
  if (attachShadow) {
    defineProperty(win.Element.prototype, "attachShadow", {
      value: function (init) {
        var root = apply(attachShadow, this, [init]);
        watch(root);
        return root;
      }, writable: false, enumerable: true, configurable: false
    });
  }
  if (win.ElementInternals) {
    var internalsRoot = getter(win.ElementInternals.prototype, "shadowRoot");
    if (internalsRoot) {
      defineProperty(win.ElementInternals.prototype, "shadowRoot", {
        get: function () {
          var root = apply(internalsRoot, this, []);
          if (root) {
            var seen = false;
            for (var i = 0; i < rootCount; i++) {
              if (roots[i] === root) {
                seen = true;
              }
            }
            if (!seen) {
              watch(root);
              check();
            }
          }
          return root;
        }, enumerable: true, configurable: false
      });
    }
  }

  // Declarative shadow roots made by script: setHTMLUnsafe and
  // parseHTMLUnsafe would attach a closed one that nothing can reach, with
  // a srcdoc frame inside. Here they parse as innerHTML and DOMParser do,
  // where a <template shadowrootmode> stays a template.
  var innerHTMLSet = getOwnPropertyDescriptor(win.Element.prototype, "innerHTML");
  var rootHTMLSet = win.ShadowRoot ? getOwnPropertyDescriptor(win.ShadowRoot.prototype, "innerHTML") : null;
  function noDeclarativeRoots(proto, desc) {
    if (proto && desc && desc.set && method(proto, "setHTMLUnsafe")) {
      defineProperty(proto, "setHTMLUnsafe", {
        value: function (html) { apply(desc.set, this, [String(html)]); }, writable: false, enumerable: true, configurable: false
      });
    }
  }
  noDeclarativeRoots(win.Element.prototype, innerHTMLSet);
  noDeclarativeRoots(win.ShadowRoot && win.ShadowRoot.prototype, rootHTMLSet);
  if (win.Document && typeof win.Document.parseHTMLUnsafe === "function" && win.DOMParser) {
    var Parser = win.DOMParser;
    var parseFromString = method(Parser.prototype, "parseFromString");
    defineProperty(win.Document, "parseHTMLUnsafe", {
      value: function (html) { return apply(parseFromString, new Parser(), [String(html), "text/html"]); },
      writable: false, enumerable: true, configurable: false
    });
  }

  // Reports: CSP violations in this document, Connection-Allowlist reports,
  // and what the guard in a frame inside this one reported.
  function onViolation(ev) {
    var d = violatedDirective ? apply(violatedDirective, ev, []) : "";
    if (typeof d === "string" && DIRECTIVES[d] === true) {
      report(d);
    }
  }
  function onMessage(ev) {
    var src = apply(eventSource, ev, []);
    if (!src || src === parentWin || src === win) {
      return;
    }
    var frames = apply(lengthOf, win, []);
    for (var i = 0; i < frames; i++) {
      if (win[i] === src) {
        var m = apply(eventData, ev, []);
        if (m !== null && typeof m === "object" && m.method === METHOD && m.params !== null && typeof m.params === "object" &&
            typeof m.params.channel === "string" && m.params.channel.length <= 40) {
          report(m.params.channel);
        }
        return;
      }
    }
  }
  // listen (again): document.open() erases a document's listeners, and
  // adding the same listener twice adds it once.
  function listen() {
    apply(addEventListener, win, ["securitypolicyviolation", onViolation, true]);
    apply(addEventListener, win, ["message", onMessage, true]);
  }
  listen();
  if (RO) {
    try {
      var ro = new RO(function (reports) {
        for (var i = 0; i < reports.length; i++) {
          var body = reports[i] && reports[i].body;
          report(body && body.connection === "webrtc" ? "webrtc" : "connection-allowlist");
        }
      }, { types: ["connection-allowlist"] });
      apply(method(RO.prototype, "observe"), ro, []);
    } catch (e) {}
  }
  if (self && self.parentNode) {
    self.parentNode.removeChild(self);
  }
})();
