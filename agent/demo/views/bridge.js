// The app side of MCP Apps (io.modelcontextprotocol/ui, protocol 2026-01-26):
// JSON-RPC 2.0 over postMessage with the host. Shared by the demo views and
// put into each of them when the server starts, so every view stays one
// self-contained document.
//
// The view runs in a sandbox with an opaque origin, so a message is trusted
// by the window it came from (window.parent), never by its origin, and is
// posted with target "*".
function createBridge(appInfo, handlers) {
  "use strict";
  var PROTOCOL_VERSION = "2026-01-26";
  var REQUEST_TIMEOUT_MS = 30000;
  var host = window.parent;
  var nextId = 1;
  var pending = new Map();
  var initialized = false;
  var lastWidth = -1;
  var lastHeight = -1;
  var sizeTimer = 0;

  function post(message) {
    host.postMessage(message, "*");
  }

  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      var timer = setTimeout(function () {
        pending.delete(id);
        reject(new Error(method + " got no answer"));
      }, REQUEST_TIMEOUT_MS);
      pending.set(id, { resolve: resolve, reject: reject, timer: timer });
      post({ jsonrpc: "2.0", id: id, method: method, params: params || {} });
    });
  }

  function notify(method, params) {
    var message = { jsonrpc: "2.0", method: method };
    if (params !== undefined) {
      message.params = params;
    }
    post(message);
  }

  function answer(id, result) {
    post({ jsonrpc: "2.0", id: id, result: result });
  }

  function answerError(id, code, message) {
    post({ jsonrpc: "2.0", id: id, error: { code: code, message: message } });
  }

  function onRequest(message) {
    if (message.method === "ui/resource-teardown") {
      if (handlers.teardown) {
        try {
          handlers.teardown(message.params || {});
        } catch (e) {
          // Teardown must still be answered, or the host waits.
        }
      }
      answer(message.id, {});
      return;
    }
    if (message.method === "ping") {
      answer(message.id, {});
      return;
    }
    answerError(message.id, -32601, "Method not found: " + message.method);
  }

  function onResponse(message) {
    var call = pending.get(message.id);
    if (!call) {
      return;
    }
    pending.delete(message.id);
    clearTimeout(call.timer);
    if (message.error) {
      var err = new Error(message.error.message || "error " + message.error.code);
      err.code = message.error.code;
      call.reject(err);
    } else {
      call.resolve(message.result);
    }
  }

  window.addEventListener("message", function (event) {
    if (event.source !== host) {
      return;
    }
    var message = event.data;
    if (!message || typeof message !== "object" || message.jsonrpc !== "2.0") {
      return;
    }
    if (typeof message.method === "string") {
      if (message.id !== undefined && message.id !== null) {
        onRequest(message);
      } else if (handlers.notification) {
        handlers.notification(message.method, message.params || {});
      }
      return;
    }
    if (message.id !== undefined && message.id !== null) {
      onResponse(message);
    }
  });

  // reportSize sends ui/notifications/size-changed when the document's size
  // changed since the last report. The height is the content's own height
  // (nothing in the views depends on the frame's height), so the host
  // resizing the frame to it cannot start a loop.
  function reportSize() {
    if (!initialized || sizeTimer) {
      return;
    }
    sizeTimer = setTimeout(function () {
      sizeTimer = 0;
      var rect = document.documentElement.getBoundingClientRect();
      var width = Math.ceil(rect.width);
      var height = Math.ceil(rect.height);
      if (width === lastWidth && height === lastHeight) {
        return;
      }
      lastWidth = width;
      lastHeight = height;
      notify("ui/notifications/size-changed", { width: width, height: height });
    }, 0);
  }

  if (typeof ResizeObserver === "function") {
    new ResizeObserver(reportSize).observe(document.documentElement);
  }

  // connect performs the handshake: ui/initialize, then
  // ui/notifications/initialized. It resolves with the host's answer.
  function connect() {
    return request("ui/initialize", {
      protocolVersion: PROTOCOL_VERSION,
      appInfo: appInfo,
      appCapabilities: {},
    }).then(function (result) {
      result = result || {};
      applyHostContext(result.hostContext || {});
      notify("ui/notifications/initialized");
      initialized = true;
      return result;
    });
  }

  // applyHostContext follows the host's theme and style variables; the
  // views' CSS uses the variables with their own values as fallbacks.
  function applyHostContext(context) {
    if (context.theme === "light" || context.theme === "dark") {
      document.documentElement.setAttribute("data-theme", context.theme);
    }
    var variables = context.styles && context.styles.variables;
    if (variables && typeof variables === "object") {
      Object.keys(variables).forEach(function (name) {
        var value = variables[name];
        if (name.indexOf("--") === 0 && typeof value === "string") {
          document.documentElement.style.setProperty(name, value);
        }
      });
    }
  }

  return {
    connect: connect,
    request: request,
    notify: notify,
    reportSize: reportSize,
    applyHostContext: applyHostContext,
    callTool: function (name, args) {
      return request("tools/call", { name: name, arguments: args || {} });
    },
  };
}

// resultText joins the text items of a CallToolResult.
function resultText(result) {
  if (!result || !Array.isArray(result.content)) {
    return "";
  }
  return result.content
    .filter(function (item) {
      return item && item.type === "text" && typeof item.text === "string";
    })
    .map(function (item) {
      return item.text;
    })
    .join("\n");
}

// initialTheme follows the system until the host names a theme.
function initialTheme() {
  var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  document.documentElement.setAttribute("data-theme", dark ? "dark" : "light");
}
