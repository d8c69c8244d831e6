// The playground page. It lets the person choose who writes, in which
// tenant and in which kind of conversation; it asks the playground's server
// side to send their message (or an install) to the bot as Teams would, and
// reads the conversation back by long polling: the bot's cards, laid out by
// Microsoft's Adaptive Cards renderer with Teams' host configuration
// (TeamsbotCards, in the page's light or dark theme), updated in place when
// the bot replaces them, their Action.Submit buttons posted to the bot as
// Teams posts them, an AI answer's label and citations as Teams shows
// them, and each view an answer names, shown inline by the shared host
// bridge (bridge.js) after the person is signed in through the local
// development sign-in. The activity inspector lists every activity sent to
// the bot and every one the bot sent back, as JSON.
(function () {
  "use strict";

  var body = document.body;
  var botName = body.getAttribute("data-bot-name") || "Assistant";
  var hostInfo = { name: body.getAttribute("data-host-name"), version: body.getAttribute("data-host-version") };
  var signInMode = body.getAttribute("data-signin");

  var $ = function (id) { return document.getElementById(id); };
  var preset = $("preset");

  // The local people (the server's one list, the same the local sign-in
  // shows) and their tenant, to start from; every field can be edited.
  // Someone else gets the default roles.
  var DEFAULT_TENANT = body.getAttribute("data-tenant");
  var DEFAULT_ROLES = body.getAttribute("data-default-roles");
  function presetOf(value) {
    var o = preset.querySelector('option[value="' + value + '"]');
    if (!o || !o.dataset.user) {
      return null;
    }
    return { name: o.dataset.name, user: o.dataset.user, roles: o.dataset.roles };
  }
  var nameIn = $("user-name");
  var userIn = $("user-id");
  var tenantIn = $("tenant");
  var transcript = $("transcript");
  var typing = $("typing");
  var compose = $("compose");
  var textIn = $("text");
  var mention = $("mention");
  var mentionBox = $("mention-box");
  var errorEl = $("error");
  var conversationEl = $("conversation-id");
  var installedEl = $("installed");

  var current = null; // {tenant, user, name, kind}
  var shownConversation = null;
  var since = null; // the seq of the state shown; null before the first read
  var poller = null; // AbortController of the poll in flight
  var nodes = {}; // activity id → {el, who, content, views, rev, mounted, item}
  // follow is set when the person has just done something the bot answers
  // (a message, an install): its answer is scrolled into view wherever
  // the transcript was.
  var follow = false;
  var inspector = $("inspector");
  var inspectorToggle = $("inspector-toggle");
  var activitiesEl = $("activities");
  var activityCount = $("activity-count");
  var lastActivity = 0; // the N of the last activity listed
  // The cards follow the person's light or dark theme, as Teams' do.
  var dark = window.matchMedia("(prefers-color-scheme: dark)");
  // Teams' Fluent theme (internal/fluent's html data-theme), light or dark.
  function useTheme() {
    document.documentElement.setAttribute("data-theme", dark.matches ? "dark" : "default");
  }
  useTheme();
  var typingTimer = null;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) {
      e.className = cls;
    }
    if (text !== undefined) {
      e.textContent = text;
    }
    return e;
  }

  function showError(msg) {
    errorEl.textContent = msg || "";
    errorEl.hidden = !msg;
  }

  function selected() {
    var kind = "personal";
    var radios = document.querySelectorAll('input[name="kind"]');
    for (var i = 0; i < radios.length; i++) {
      if (radios[i].checked) {
        kind = radios[i].value;
      }
    }
    var p = presetOf(preset.value);
    return { tenant: tenantIn.value.trim(), user: userIn.value.trim(), name: nameIn.value.trim(), kind: kind, roles: p ? p.roles : DEFAULT_ROLES };
  }

  // The local sign-in: the person chosen here is the one the bot runs
  // for, so the views of their runs open for them, and only for them.
  var signedAs = null;
  var signing = null;

  function ensureSignedIn() {
    if (signInMode !== "local") {
      return Promise.reject(new Error("the local development sign-in is off (see docs/getting-started.md), so views cannot be opened here"));
    }
    var who = current;
    var want = who.tenant + "\n" + who.user + "\n" + who.name + "\n" + who.roles;
    if (signedAs === want) {
      return Promise.resolve();
    }
    if (signing && signing.want === want) {
      return signing.p;
    }
    var form = new URLSearchParams();
    form.set("name", who.name);
    form.set("tenant", who.tenant);
    form.set("user", who.user);
    form.set("roles", who.roles);
    form.set("return", "/playground");
    var p = fetch("/signin/local", { method: "POST", body: form, credentials: "same-origin", redirect: "manual" })
      .then(function (r) {
        if (r.type === "opaqueredirect" || r.ok) {
          signedAs = want;
          return;
        }
        throw new Error("the local sign-in answered " + r.status);
      });
    signing = { want: want, p: p };
    p.catch(function () {
      if (signing && signing.p === p) {
        signing = null;
      }
    });
    return p;
  }

  function stateURL() {
    var q = new URLSearchParams();
    q.set("tenant", current.tenant);
    q.set("user", current.user);
    q.set("name", current.name);
    q.set("kind", current.kind);
    if (since !== null) {
      q.set("since", String(since));
      q.set("after", String(lastActivity));
    }
    return "/playground/api/state?" + q.toString();
  }

  function poll() {
    var ctl = new AbortController();
    poller = ctl;
    fetch(stateURL(), { credentials: "same-origin", headers: { Accept: "application/json" }, signal: ctl.signal })
      .then(function (r) {
        return r.json().then(function (j) {
          if (!r.ok) {
            throw new Error(j && j.error ? j.error : "HTTP " + r.status);
          }
          return j;
        });
      })
      .then(function (s) {
        if (poller !== ctl) {
          return;
        }
        apply(s);
        poll();
      })
      .catch(function (e) {
        if (poller !== ctl || ctl.signal.aborted) {
          return;
        }
        showError("The playground could not read the conversation: " + e.message);
        setTimeout(function () {
          if (poller === ctl) {
            poll();
          }
        }, 1000);
      });
  }

  function restart() {
    var next = selected();
    if (current && next.tenant === current.tenant && next.user === current.user && next.name === current.name && next.kind === current.kind && next.roles === current.roles) {
      return;
    }
    current = next;
    $("roles").textContent = current.roles;
    mentionBox.hidden = current.kind === "personal";
    since = null;
    clearActivities();
    if (poller) {
      poller.abort();
    }
    showError("");
    if (!current.tenant || !current.user || !current.name) {
      showError("Give the person a name, an object id and a tenant id.");
      return;
    }
    ensureSignedIn().catch(function (e) {
      $("signin-note").textContent = "Views are not shown inline: " + e.message + ".";
    });
    poll();
  }

  // dropNode takes a message off the transcript. Its views are told first
  // (ui/resource-teardown) and given a moment to answer; meanwhile the
  // message is hidden, and its frames keep running until they are removed.
  function dropNode(n) {
    var ends = [];
    for (var id in n.mounted) {
      if (Object.prototype.hasOwnProperty.call(n.mounted, id)) {
        ends.push(n.mounted[id].teardown("the message left the transcript"));
      }
    }
    n.el.hidden = true;
    n.el.style.display = "none";
    Promise.all(ends).then(function () {
      if (n.el.parentNode) {
        n.el.parentNode.removeChild(n.el);
      }
    });
  }

  function clearTranscript() {
    for (var id in nodes) {
      if (Object.prototype.hasOwnProperty.call(nodes, id)) {
        dropNode(nodes[id]);
      }
    }
    nodes = {};
    var rest = Array.prototype.slice.call(transcript.children);
    for (var i = 0; i < rest.length; i++) {
      if (!rest[i].hidden) {
        transcript.removeChild(rest[i]);
      }
    }
  }

  function timeOf(iso) {
    var d = new Date(iso);
    return isNaN(d.getTime()) ? "" : d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  }

  // withMentions shows "<at>Name</at>" as Teams does: the name, marked.
  function withMentions(parent, text) {
    var re = /<at>([^<]*)<\/at>/g;
    var last = 0;
    var m;
    while ((m = re.exec(text)) !== null) {
      parent.appendChild(document.createTextNode(text.slice(last, m.index)));
      parent.appendChild(el("span", "at", m[1]));
      last = m.index + m[0].length;
    }
    parent.appendChild(document.createTextNode(text.slice(last)));
  }

  function initials(name) {
    var parts = String(name || "?").trim().split(/\s+/);
    return (parts[0].charAt(0) + (parts.length > 1 ? parts[parts.length - 1].charAt(0) : "")).toUpperCase();
  }

  function newNode(it) {
    if (it.from === "event") {
      var p = el("p", "event", it.text);
      return { el: p, content: null, views: null, rev: it.revision, mounted: {} };
    }
    var row = el("div", "msg " + (it.from === "bot" ? "bot" : "user"));
    row.setAttribute("data-activity-id", it.id);
    row.appendChild(el("div", "avatar", initials(it.name)));
    var b = el("div", "body");
    var who = el("p", "who");
    who.appendChild(el("strong", "", it.name));
    who.appendChild(document.createTextNode(timeOf(it.time)));
    b.appendChild(who);
    var content = el("div", "content");
    b.appendChild(content);
    var views = el("div", "views");
    b.appendChild(views);
    row.appendChild(b);
    return { el: row, who: who, content: content, views: views, rev: 0, mounted: {} };
  }

  function renderContent(n, it) {
    n.item = it;
    n.el.setAttribute("data-revision", String(it.revision));
    var c = n.content;
    while (c.firstChild) {
      c.removeChild(c.firstChild);
    }
    if (it.deleted) {
      c.appendChild(el("div", "bubble deleted", "This message has been deleted."));
      return;
    }
    // Teams labels an AI answer beside the bot's name.
    var label = n.who.querySelector(".ai-label");
    if (it.ai && !label) {
      label = el("span", "ai-label", "AI generated");
      label.title = "AI-generated content may be incorrect";
      n.who.insertBefore(label, n.who.childNodes[1]);
    } else if (!it.ai && label) {
      n.who.removeChild(label);
    }
    if (it.text) {
      // An open stream shows the bot's informative update, as Teams does.
      var bubble = el("div", it.streaming ? "bubble streaming" : "bubble");
      if (it.citations && it.citations.length) {
        withCitations(bubble, c, it);
      } else {
        withMentions(bubble, it.text);
      }
      c.appendChild(bubble);
    }
    var atts = it.attachments || [];
    for (var i = 0; i < atts.length; i++) {
      if (atts[i].contentType === "application/vnd.microsoft.card.adaptive") {
        c.appendChild(window.TeamsbotCards.render(atts[i].content, {
          theme: dark.matches ? "dark" : "light",
          onAction: function (a) {
            cardAction(it, a);
          }
        }));
      } else {
        c.appendChild(el("div", "bubble deleted", "[" + atts[i].contentType + "]"));
      }
    }
  }

  // cardAction takes a card's button as Teams does. An Action.Submit whose
  // data is an object without msteams goes to the bot as a message of the
  // person, replying to the card, with no text and the value the renderer
  // gathered: the button's data and each input's value under its id, as
  // Teams sends them (text; a toggle's valueOn or valueOff; a multiple
  // choice's values joined by commas). The bot answers by updating the
  // card, which is then shown anew. Any other action (a Stage View button,
  // whose data.msteams is an invoke; Action.Execute) Teams would handle
  // itself or send as an invoke, which the playground does not.
  function cardAction(it, a) {
    var data = a.data;
    var plain = a.type === "Action.Submit" && data !== null && typeof data === "object" && !Array.isArray(data) &&
      !Object.prototype.hasOwnProperty.call(data, "msteams");
    if (!plain) {
      showError("Teams would send “" + (a.title || a.type) + "” to the bot; the playground does not.");
      return;
    }
    showError("");
    follow = true;
    var p = who();
    p.replyToId = it.id;
    p.value = data;
    postJSON("/playground/api/submit", p).catch(function (e) {
      showError(e.message);
    });
  }

  // withCitations shows the text of an AI answer as Teams does: each [n]
  // that names one of its citations is a marker, a button whose pop-up
  // (popovers, kept in c beside the bubble) says what the citation is and
  // links to it.
  function withCitations(bubble, c, it) {
    var byPosition = {};
    for (var i = 0; i < it.citations.length; i++) {
      byPosition[it.citations[i].position] = it.citations[i];
    }
    var re = /\[(\d{1,2})\]/g;
    var last = 0;
    var m;
    while ((m = re.exec(it.text)) !== null) {
      var cite = byPosition[Number(m[1])];
      if (!cite) {
        continue;
      }
      bubble.appendChild(document.createTextNode(it.text.slice(last, m.index)));
      bubble.appendChild(citationMarker(c, it.id, cite));
      last = m.index + m[0].length;
    }
    bubble.appendChild(document.createTextNode(it.text.slice(last)));
  }

  function citationMarker(c, key, cite) {
    var pop = el("div", "cite-pop");
    pop.id = "cite-" + key + "-" + cite.position;
    pop.popover = "auto";
    pop.setAttribute("role", "dialog");
    pop.setAttribute("aria-label", "Citation " + cite.position);
    var title = el("p", "cite-title");
    title.appendChild(el("span", "cite-n", String(cite.position)));
    var href = safeURL(cite.url);
    if (href) {
      var a = el("a", "", cite.name);
      a.href = href;
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      title.appendChild(a);
    } else {
      title.appendChild(document.createTextNode(cite.name));
    }
    pop.appendChild(title);
    if (cite.abstract) {
      pop.appendChild(el("p", "cite-abstract", cite.abstract));
    }
    if (cite.keywords && cite.keywords.length) {
      var kw = el("p", "cite-keywords");
      for (var i = 0; i < cite.keywords.length; i++) {
        kw.appendChild(el("span", "", cite.keywords[i]));
      }
      pop.appendChild(kw);
    }
    c.appendChild(pop);
    var b = el("button", "cite", String(cite.position));
    b.type = "button";
    b.setAttribute("aria-label", "Citation " + cite.position + ": " + cite.name);
    b.popoverTargetElement = pop;
    // The pop-up opens under its marker, kept inside the window.
    pop.addEventListener("toggle", function (e) {
      if (e.newState !== "open") {
        return;
      }
      var r = b.getBoundingClientRect();
      var left = Math.max(8, Math.min(r.left, window.innerWidth - pop.offsetWidth - 8));
      var top = r.bottom + 4;
      if (top + pop.offsetHeight > window.innerHeight - 8) {
        top = Math.max(8, r.top - pop.offsetHeight - 4);
      }
      pop.style.left = left + "px";
      pop.style.top = top + "px";
    });
    return b;
  }

  function safeURL(u) {
    try {
      var url = new URL(String(u || ""), window.location.href);
      if (url.protocol === "https:" || url.protocol === "http:") {
        return url.href;
      }
    } catch (e) {}
    return "";
  }

  // The activity inspector: one entry per activity, a button that opens
  // its JSON.
  function clearActivities() {
    while (activitiesEl.firstChild) {
      activitiesEl.removeChild(activitiesEl.firstChild);
    }
    lastActivity = 0;
    activityCount.textContent = "0";
  }

  function activityTime(iso) {
    var d = new Date(iso);
    return isNaN(d.getTime()) ? "" : d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  function addActivity(e) {
    lastActivity = e.n;
    var a = e.activity || null;
    var li = el("li", "activity " + e.dir);
    li.setAttribute("data-n", String(e.n));
    var b = el("button", "activity-head");
    b.type = "button";
    b.setAttribute("aria-expanded", "false");
    b.appendChild(el("span", "activity-dir", e.dir === "to-bot" ? "To the bot" : "From the bot"));
    var kind = a && typeof a.type === "string" ? a.type : "no body";
    var entities = a && Array.isArray(a.entities) ? a.entities : [];
    for (var i = 0; i < entities.length; i++) {
      if (entities[i] && String(entities[i].type).toLowerCase() === "streaminfo") {
        kind += " (stream" + (entities[i].streamType ? " " + entities[i].streamType : "") + ")";
      }
    }
    if (a && a.type === "message" && a.value && typeof a.value === "object") {
      kind += " (card action)";
    }
    b.appendChild(el("span", "activity-kind", kind));
    b.appendChild(el("span", "activity-call", e.call));
    b.appendChild(el("span", "activity-time", activityTime(e.time)));
    var pre = el("pre", "activity-json", a ? JSON.stringify(a, null, 2) : "(no body)");
    pre.id = "activity-" + e.n;
    pre.hidden = true;
    pre.tabIndex = 0;
    pre.setAttribute("aria-label", "JSON of activity " + e.n);
    b.setAttribute("aria-controls", pre.id);
    b.addEventListener("click", function () {
      var open = pre.hidden;
      pre.hidden = !open;
      b.setAttribute("aria-expanded", open ? "true" : "false");
    });
    li.appendChild(b);
    li.appendChild(pre);
    activitiesEl.appendChild(li);
  }

  function showActivities(list) {
    var atEnd = inspector.scrollHeight - inspector.scrollTop - inspector.clientHeight < 40;
    for (var i = 0; i < list.length; i++) {
      if (list[i].n > lastActivity) {
        addActivity(list[i]);
      }
    }
    activityCount.textContent = String(activitiesEl.children.length);
    if (atEnd) {
      inspector.scrollTop = inspector.scrollHeight;
    }
  }

  function showInspector(open) {
    inspector.hidden = !open;
    inspectorToggle.setAttribute("aria-expanded", open ? "true" : "false");
    document.body.classList.toggle("inspecting", open);
    if (open) {
      inspector.scrollTop = inspector.scrollHeight;
    }
  }

  function mountView(n, v) {
    var box = el("section", "inline-view");
    box.setAttribute("data-view-id", v.id);
    box.setAttribute("aria-label", "View " + (v.title || v.tool));
    var head = el("div", "view-head");
    head.appendChild(el("strong", "", (v.title || v.tool || "View") + (v.server ? " · " + v.server : "")));
    var open = el("a", "", "Open");
    open.href = "/mcp-apps/" + encodeURIComponent(v.id);
    open.target = "_blank";
    open.rel = "noopener noreferrer";
    open.title = "Open the view on its own page, as the card's Open button does in Teams";
    head.appendChild(open);
    box.appendChild(head);
    var frameBox = el("div", "frame-box");
    box.appendChild(frameBox);
    var status = el("p", "view-status");
    status.setAttribute("role", "status");
    box.appendChild(status);
    var messages = el("div");
    messages.hidden = true;
    messages.appendChild(el("p", "view-status", "Messages from the view (shown here only; not sent to the agent):"));
    var list = el("ul");
    messages.appendChild(list);
    box.appendChild(messages);
    n.views.appendChild(box);
    status.textContent = "Signing in…";
    // The view's handle: its teardown ends the view once it is mounted,
    // and keeps it from being mounted when it is dropped before.
    var handle = null;
    var dropped = false;
    ensureSignedIn().then(function () {
      if (dropped) {
        return;
      }
      handle = window.TeamsbotBridge.mount({
        api: "/api/mcp-apps/" + encodeURIComponent(v.id),
        hostInfo: hostInfo,
        box: frameBox,
        status: status,
        messages: messages,
        messageList: list
      });
    }).catch(function (e) {
      status.textContent = "The view could not be shown: " + e.message + ".";
    });
    return {
      teardown: function (reason) {
        dropped = true;
        return handle ? handle.teardown(reason) : Promise.resolve();
      }
    };
  }

  function apply(s) {
    if (s.conversation !== shownConversation) {
      clearTranscript();
      clearActivities();
      shownConversation = s.conversation;
    }
    showActivities(s.activities || []);
    since = s.seq;
    conversationEl.textContent = s.conversation;
    installedEl.textContent = s.installed
      ? botName + " is installed here: the bot keeps this conversation's reference."
      : botName + " is not installed here. Add it to get its welcome card (messages work either way).";
    installedEl.setAttribute("data-installed", s.installed ? "true" : "false");

    var nearBottom = transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
    var seen = {};
    var added = null; // the last message added
    var botAdded = false;
    var items = s.items || [];
    for (var i = 0; i < items.length; i++) {
      var it = items[i];
      seen[it.id] = true;
      var n = nodes[it.id];
      if (!n) {
        n = newNode(it);
        nodes[it.id] = n;
        transcript.appendChild(n.el);
        added = n;
        botAdded = botAdded || it.from === "bot";
      }
      if (n.content && n.rev !== it.revision) {
        renderContent(n, it);
        n.rev = it.revision;
      }
      var views = it.views || [];
      for (var k = 0; k < views.length; k++) {
        if (!n.mounted[views[k].id] && n.views) {
          n.mounted[views[k].id] = mountView(n, views[k]);
        }
      }
    }
    for (var id in nodes) {
      if (Object.prototype.hasOwnProperty.call(nodes, id) && !seen[id]) {
        dropNode(nodes[id]);
        delete nodes[id];
      }
    }
    if (added && (nearBottom || follow)) {
      // To the end, unless that hides the new message's top (a card
      // taller than the transcript): then from its top.
      transcript.scrollTop = transcript.scrollHeight;
      if (added.el.getBoundingClientRect().top < transcript.getBoundingClientRect().top) {
        added.el.scrollIntoView({ block: "start" });
      }
    }
    if (botAdded) {
      follow = false;
    }
    clearTimeout(typingTimer);
    typing.hidden = !(s.typingMs > 0);
    if (s.typingMs > 0) {
      typingTimer = setTimeout(function () { typing.hidden = true; }, s.typingMs);
    }
  }

  function postJSON(path, payload) {
    return fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(payload)
    }).then(function (r) {
      return r.json().then(function (j) {
        if (!r.ok) {
          throw new Error(j && j.error ? j.error : "HTTP " + r.status);
        }
        return j;
      });
    });
  }

  function who() {
    return { tenant: current.tenant, user: current.user, name: current.name, kind: current.kind };
  }

  function send(text) {
    restart();
    showError("");
    follow = true;
    var p = who();
    p.text = text;
    p.mention = current.kind !== "personal" && mention.checked;
    // Signed in first, so the views of the answer open at once.
    return ensureSignedIn().catch(function () {}).then(function () {
      return postJSON("/playground/api/send", p);
    }).catch(function (e) {
      showError(e.message);
    });
  }

  function installAction(action) {
    restart();
    showError("");
    follow = true;
    var p = who();
    p.action = action;
    postJSON("/playground/api/install", p).catch(function (e) {
      showError(e.message);
    });
  }

  function usePreset() {
    var p = presetOf(preset.value);
    if (p) {
      nameIn.value = p.name;
      userIn.value = p.user;
      tenantIn.value = DEFAULT_TENANT;
    }
  }

  preset.addEventListener("change", function () {
    usePreset();
    restart();
  });
  [nameIn, userIn, tenantIn].forEach(function (input) {
    input.addEventListener("change", function () {
      preset.value = "other";
      restart();
    });
  });
  var radios = document.querySelectorAll('input[name="kind"]');
  for (var r = 0; r < radios.length; r++) {
    radios[r].addEventListener("change", restart);
  }
  compose.addEventListener("submit", function (e) {
    e.preventDefault();
    var text = textIn.value.trim();
    if (!text) {
      return;
    }
    textIn.value = "";
    send(text);
  });
  var tries = document.querySelectorAll("button.try");
  for (var t = 0; t < tries.length; t++) {
    tries[t].addEventListener("click", function (e) {
      send(e.currentTarget.getAttribute("data-text"));
    });
  }
  dark.addEventListener("change", function () {
    useTheme();
    for (var id in nodes) {
      if (Object.prototype.hasOwnProperty.call(nodes, id) && nodes[id].item) {
        renderContent(nodes[id], nodes[id].item);
      }
    }
  });
  inspectorToggle.addEventListener("click", function () {
    showInspector(inspector.hidden);
  });
  $("inspector-close").addEventListener("click", function () {
    showInspector(false);
    inspectorToggle.focus();
  });
  $("install").addEventListener("click", function () { installAction("add"); });
  $("uninstall").addEventListener("click", function () { installAction("remove"); });

  preset.value = "0";
  usePreset();
  tenantIn.value = DEFAULT_TENANT;
  if (signInMode !== "local") {
    $("signin-note").textContent = "The local development sign-in is off, so views are not shown inline; run ./run.sh, which listens on 127.0.0.1.";
  }
  restart();
})();
