// The view page: it shows its one view with the shared host bridge
// (bridge.js, loaded before this script), taking the view's API path and the
// host's name and version from the page.
(function () {
  "use strict";

  var body = document.body;
  window.TeamsbotBridge.mount({
    api: body.getAttribute("data-api"),
    hostInfo: { name: body.getAttribute("data-host-name"), version: body.getAttribute("data-host-version") },
    box: document.getElementById("frame-box"),
    frameId: "proxy",
    status: document.getElementById("status"),
    messages: document.getElementById("messages"),
    messageList: document.getElementById("message-list")
  });
})();
