// The view page: it shows its one view with the shared host bridge
// (bridge.js, loaded before this script), and what the view's servers ask
// during its calls with questions.js (loaded before it too), taking the
// view's API path and the host's name and version from the page.
(function () {
  "use strict";

  var body = document.body;
  var status = document.getElementById("status");
  var close = document.getElementById("close");
  // Inside Teams, teams-page.js first reads the Teams context: its theme
  // and locale become the view's host context. Elsewhere there is nothing
  // to wait for.
  var host = window.TeamsbotHost || Promise.resolve(null);
  var api = body.getAttribute("data-api");
  // What a server asks during the view's calls is shown by the page
  // (questions.js), never by the view.
  var questions = window.TeamsbotQuestions.start({ api: api, status: status });
  host.then(function (hostContext) {
    var view = window.TeamsbotBridge.mount({
      api: api,
      hostInfo: { name: body.getAttribute("data-host-name"), version: body.getAttribute("data-host-version") },
      hostContext: hostContext,
      box: document.getElementById("frame-box"),
      frameId: "proxy",
      status: status,
      messages: document.getElementById("messages"),
      messageList: document.getElementById("message-list"),
      questions: questions
    });
    window.TeamsbotHostChanged = view.hostContextChanged;
    // Close ends the view as the MCP Apps specification asks: the view is
    // told (ui/resource-teardown) and given a moment before its frames go.
    close.addEventListener("click", function () {
      close.disabled = true;
      view.teardown("closed by the person").then(function () {
        close.hidden = true;
        status.textContent = "The view was closed. Reload the page to open it again.";
      });
    });
  });
})();
