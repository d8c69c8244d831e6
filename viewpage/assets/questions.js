// What an MCP server asks the person during a view's tool call
// (elicitation), shown by the page itself: in a modal dialog of the page's
// own document, outside the view's two sandboxed frames, so that the view
// can neither read the question nor fill in the answer, and nothing of
// either is ever posted to it. While a view's tools/call is under way the
// page asks its API which questions wait for this person on this view
// (GET {api}/questions?known=..., which the service holds until the list
// changes), shows them one at a time, and sends the answer to the API
// (POST {api}/questions/{id}); the service checks a form's answer and
// says what to correct. Everything a server wrote is put on the page as
// text. It defines one global, TeamsbotQuestions, whose start returns
// what the bridge's mount takes as o.questions.
(function () {
  "use strict";

  // How long to wait before asking again after a failed request.
  var RETRY_MS = 2000;
  // A single choice of at most this many options shows as radio buttons,
  // of more as a list.
  var MAX_RADIOS = 5;

  function isObject(m) {
    return m !== null && typeof m === "object" && !Array.isArray(m);
  }

  function el(tag, className, text) {
    var e = document.createElement(tag);
    if (className) {
      e.className = className;
    }
    if (text !== undefined) {
      e.textContent = text;
    }
    return e;
  }

  function httpsURL(s) {
    try {
      var u = new URL(String(s));
      return u.protocol === "https:" && u.host !== "" ? u.href : "";
    } catch (e) {
      return "";
    }
  }

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  // localInput turns an RFC 3339 date and time into a datetime-local
  // input's value, in the browser's time zone.
  function localInput(s) {
    var d = new Date(String(s));
    if (isNaN(d.getTime())) {
      return "";
    }
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  // rfc3339 turns a datetime-local input's value into RFC 3339 with the
  // browser's offset at that time, as the service checks a date-time.
  function rfc3339(v) {
    var m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/.exec(v);
    if (!m) {
      return v;
    }
    var sec = m[6] || "00";
    var d = new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +sec);
    var off = -d.getTimezoneOffset();
    var sign = off >= 0 ? "+" : "-";
    off = Math.abs(off);
    return m[1] + "-" + m[2] + "-" + m[3] + "T" + m[4] + ":" + m[5] + ":" + sec + sign + pad(Math.floor(off / 60)) + ":" + pad(off % 60);
  }

  // valid keeps what the page can show of a question from the API.
  function valid(q) {
    if (!isObject(q) || typeof q.id !== "string" || q.id === "" || typeof q.server !== "string" || typeof q.tool !== "string") {
      return false;
    }
    if (q.mode === "url") {
      return httpsURL(q.url) !== "";
    }
    return q.mode === "form" && isObject(q.form) && Array.isArray(q.form.fields);
  }

  // start shows the questions of the view whose API path is o.api; o.status
  // is the page's status line, which says how each question ended.
  function start(o) {
    var api = o.api;
    var statusEl = o.status;

    var calls = 0; // the view's calls under way
    var polling = false;
    var controller = null; // of the list request under way
    var latest = []; // the questions of the last list
    var known = []; // their ids
    var sent = Object.create(null); // ids answered here, until the list drops them
    var current = null; // the question shown: {q, fields, busy}

    var dialog = el("dialog", "question");
    dialog.id = "question";
    dialog.setAttribute("aria-labelledby", "question-title");
    document.body.appendChild(dialog);
    // Escape dismisses the question: the server is told cancel. A browser
    // may close the dialog on a second Escape all the same; the question
    // is then dismissed too.
    dialog.addEventListener("cancel", function (e) {
      e.preventDefault();
      send("cancel");
    });
    dialog.addEventListener("close", function () {
      // The event comes after the page's own close too, when the next
      // question may be open already: only a question still shown in a
      // closed dialog is the browser's doing.
      if (current && !dialog.open) {
        send("cancel");
      }
    });

    function say(text) {
      statusEl.textContent = text;
    }

    // callStarted counts a view's call and asks for its questions; the
    // function it returns is called when the call ends.
    function callStarted() {
      calls++;
      poll();
      var ended = false;
      return function () {
        if (ended) {
          return;
        }
        ended = true;
        calls--;
        if (calls === 0 && known.length === 0 && controller) {
          controller.abort();
        }
      };
    }

    function poll() {
      if (polling) {
        return;
      }
      polling = true;
      next();
    }

    function next() {
      if (calls === 0 && known.length === 0) {
        polling = false;
        return;
      }
      controller = new AbortController();
      fetch(api + "/questions?known=" + encodeURIComponent(known.join(",")), {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
        signal: controller.signal
      }).then(function (resp) {
        if (!resp.ok) {
          throw new Error("HTTP " + resp.status);
        }
        return resp.json();
      }).then(function (j) {
        controller = null;
        update(isObject(j) && Array.isArray(j.questions) ? j.questions : []);
        next();
      }).catch(function () {
        controller = null;
        setTimeout(next, calls === 0 ? 0 : RETRY_MS);
      });
    }

    function update(list) {
      latest = list.filter(valid);
      known = latest.map(function (q) { return q.id; });
      for (var id in sent) {
        if (known.indexOf(id) < 0) {
          delete sent[id];
        }
      }
      if (current && !current.busy && known.indexOf(current.q.id) < 0) {
        var server = current.q.server;
        close();
        say("The question from " + server + " no longer waits for your answer: the server said it is done, its time ran out, or the view's call ended.");
      }
      showNext();
    }

    function showNext() {
      if (current) {
        return;
      }
      for (var i = 0; i < latest.length; i++) {
        if (!sent[latest[i].id]) {
          show(latest[i]);
          return;
        }
      }
    }

    function close() {
      current = null;
      if (dialog.open) {
        dialog.close();
      }
      dialog.replaceChildren();
    }

    // show fills the dialog with question q and opens it.
    function show(q) {
      var url = q.mode === "url" ? httpsURL(q.url) : "";
      current = { q: q, fields: [], busy: false };
      var form = el("form", "question-form");
      form.noValidate = true;
      form.appendChild(el("h2", "", "A question from " + q.server)).id = "question-title";
      var about = "Asked during the view's call of " + q.tool + ". Only you see it here; the view sees neither the question nor your answer.";
      var deadline = new Date(q.deadline);
      if (!isNaN(deadline.getTime())) {
        about += " Answer by " + deadline.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) + ".";
      }
      form.appendChild(el("p", "meta", about));
      if (typeof q.message === "string" && q.message !== "") {
        var msg = form.appendChild(el("p", "question-message", q.message));
        msg.id = "question-message";
        dialog.setAttribute("aria-describedby", msg.id);
      } else {
        dialog.removeAttribute("aria-describedby");
      }
      var alert = form.appendChild(el("p", "problem"));
      alert.id = "question-problem";
      alert.setAttribute("role", "alert");
      alert.hidden = true;
      current.alert = alert;

      var primary = "Submit";
      if (url) {
        primary = "Continue";
        form.appendChild(el("p", "", q.server + " asks you to open this address:"));
        form.appendChild(el("p", "question-url")).appendChild(el("code", "", url)).id = "question-url";
        var open = el("a", "button", "Open");
        open.id = "question-open";
        open.href = url;
        open.target = "_blank";
        open.rel = "noopener noreferrer";
        form.appendChild(el("p")).appendChild(open);
        form.appendChild(el("p", "meta", "Continue tells " + q.server + " you go on there; Decline or Cancel tells it you do not."));
      } else {
        var clipped = Array.isArray(q.form.clipped) ? q.form.clipped.filter(function (c) { return typeof c === "string"; }) : [];
        if (clipped.length > 0) {
          form.appendChild(el("p", "warning", "Part of the question was left out to fit: " + clipped.join("; ") + "."));
        }
        for (var i = 0; i < q.form.fields.length; i++) {
          var f = q.form.fields[i];
          if (isObject(f) && typeof f.name === "string") {
            var fd = field(f, i);
            current.fields.push(fd);
            form.appendChild(fd.block);
          }
        }
      }

      var actions = form.appendChild(el("p", "question-actions"));
      var submit = actions.appendChild(el("button", "primary", primary));
      submit.type = "submit";
      submit.id = "question-submit";
      var decline = actions.appendChild(el("button", "secondary", "Decline"));
      decline.type = "button";
      decline.id = "question-decline";
      decline.addEventListener("click", function () { send("decline"); });
      var cancel = actions.appendChild(el("button", "secondary", "Cancel"));
      cancel.type = "button";
      cancel.id = "question-cancel";
      cancel.addEventListener("click", function () { send("cancel"); });
      form.addEventListener("submit", function (e) {
        e.preventDefault();
        send("accept");
      });

      dialog.replaceChildren(form);
      dialog.showModal();
      var first = form.querySelector("input, select");
      (first || submit).focus();
    }

    // field makes the inputs of one form field; value reads the answer.
    function field(f, i) {
      var id = "question-field-" + i;
      var block = el("div", "question-field");
      var label = typeof f.title === "string" && f.title !== "" ? f.title : f.name;
      var required = f.required === true;
      var inputs = [];
      var value;
      var labelled = function (tag) {
        var l = el(tag);
        l.appendChild(document.createTextNode(label));
        if (required) {
          l.appendChild(el("span", "required", " (required)"));
        }
        return l;
      };
      var options = Array.isArray(f.options) ? f.options.filter(function (op) {
        return isObject(op) && typeof op.value === "string";
      }) : [];
      var title = function (op) {
        return typeof op.title === "string" && op.title !== "" ? op.title : op.value;
      };
      var group = function () {
        var fs = el("fieldset", "question-choices");
        fs.appendChild(labelled("legend"));
        block.appendChild(fs);
        return fs;
      };
      var choice = function (parent, type, op, j, checked) {
        var row = parent.appendChild(el("div", "question-check"));
        var input = row.appendChild(el("input"));
        input.type = type;
        input.id = id + "-" + j;
        input.name = id;
        input.value = op.value;
        input.checked = checked;
        var l = row.appendChild(el("label", "", title(op)));
        l.htmlFor = input.id;
        inputs.push(input);
        return input;
      };

      switch (f.kind) {
        case "boolean": {
          var row = block.appendChild(el("div", "question-check"));
          var box = row.appendChild(el("input"));
          box.type = "checkbox";
          box.id = id;
          box.checked = f.default === true;
          var bl = row.appendChild(labelled("label"));
          bl.htmlFor = id;
          inputs.push(box);
          value = function () { return box.checked; };
          break;
        }
        case "choice": {
          var def = typeof f.default === "string" ? f.default : "";
          if (options.length <= MAX_RADIOS) {
            var fs = group();
            for (var j = 0; j < options.length; j++) {
              choice(fs, "radio", options[j], j, options[j].value === def).required = required;
            }
            value = function () {
              for (var k = 0; k < inputs.length; k++) {
                if (inputs[k].checked) {
                  return inputs[k].value;
                }
              }
              return "";
            };
          } else {
            var sl = block.appendChild(labelled("label"));
            sl.htmlFor = id;
            var select = block.appendChild(el("select"));
            select.id = id;
            select.required = required;
            if (def === "") {
              select.appendChild(el("option", "", "Choose one")).value = "";
            }
            for (var n = 0; n < options.length; n++) {
              var opt = select.appendChild(el("option", "", title(options[n])));
              opt.value = options[n].value;
              opt.selected = options[n].value === def;
            }
            inputs.push(select);
            value = function () { return select.value; };
          }
          break;
        }
        case "choices": {
          var defs = Array.isArray(f.default) ? f.default : [];
          var cs = group();
          for (var c = 0; c < options.length; c++) {
            choice(cs, "checkbox", options[c], c, defs.indexOf(options[c].value) >= 0);
          }
          value = function () {
            var picked = [];
            for (var k = 0; k < inputs.length; k++) {
              if (inputs[k].checked) {
                picked.push(inputs[k].value);
              }
            }
            return picked;
          };
          break;
        }
        default: {
          var tl = block.appendChild(labelled("label"));
          tl.htmlFor = id;
          var input = block.appendChild(el("input"));
          input.id = id;
          input.required = required;
          var number = f.kind === "number" || f.kind === "integer";
          var dateTime = false;
          if (number) {
            input.type = "number";
            input.step = f.kind === "integer" ? "1" : "any";
            if (typeof f.minimum === "number") {
              input.min = String(f.minimum);
            }
            if (typeof f.maximum === "number") {
              input.max = String(f.maximum);
            }
          } else {
            switch (f.format) {
              case "email":
                input.type = "email";
                break;
              case "uri":
                input.type = "url";
                break;
              case "date":
                input.type = "date";
                break;
              case "date-time":
                input.type = "datetime-local";
                input.step = "1";
                dateTime = true;
                break;
              default:
                input.type = "text";
            }
            if (typeof f.minLength === "number") {
              input.minLength = f.minLength;
            }
            if (typeof f.maxLength === "number") {
              input.maxLength = f.maxLength;
            }
          }
          if (f.default !== undefined && f.default !== null) {
            input.value = dateTime ? localInput(f.default) : String(f.default);
          }
          inputs.push(input);
          value = function () { return dateTime && input.value !== "" ? rfc3339(input.value) : input.value; };
        }
      }

      var help = null;
      if (typeof f.description === "string" && f.description !== "") {
        help = block.appendChild(el("p", "field-help", f.description));
        help.id = id + "-help";
      }
      var problem = block.appendChild(el("p", "field-problem"));
      problem.id = id + "-problem";
      problem.hidden = true;
      var describe = function (withProblem) {
        var ids = [];
        if (help) {
          ids.push(help.id);
        }
        if (withProblem) {
          ids.push(problem.id);
        }
        for (var k = 0; k < inputs.length; k++) {
          if (ids.length > 0) {
            inputs[k].setAttribute("aria-describedby", ids.join(" "));
          } else {
            inputs[k].removeAttribute("aria-describedby");
          }
          if (withProblem) {
            inputs[k].setAttribute("aria-invalid", "true");
          } else {
            inputs[k].removeAttribute("aria-invalid");
          }
        }
      };
      describe(false);
      return {
        name: f.name,
        block: block,
        inputs: inputs,
        value: value,
        // mark shows what to correct in this field, or clears it.
        mark: function (text) {
          problem.textContent = text || "";
          problem.hidden = !text;
          describe(!!text);
        }
      };
    }

    function setBusy(busy) {
      var buttons = dialog.querySelectorAll("button");
      for (var i = 0; i < buttons.length; i++) {
        buttons[i].disabled = busy;
      }
    }

    function showAlert(cur, text) {
      cur.alert.textContent = text;
      cur.alert.hidden = false;
    }

    // showProblems marks each field the service found wrong, says so at
    // the top, and takes the person to the first.
    function showProblems(cur, text, problems) {
      var byName = Object.create(null);
      for (var i = 0; i < problems.length; i++) {
        var p = problems[i];
        if (isObject(p) && typeof p.field === "string" && typeof p.message === "string") {
          byName[p.field] = p.message;
        }
      }
      var first = null;
      for (var j = 0; j < cur.fields.length; j++) {
        var fd = cur.fields[j];
        var m = byName[fd.name];
        fd.mark(m);
        if (m !== undefined) {
          delete byName[fd.name];
          if (!first && fd.inputs.length > 0) {
            first = fd.inputs[0];
          }
        }
      }
      var rest = [];
      for (var name in byName) {
        rest.push(byName[name]);
      }
      showAlert(cur, rest.length > 0 ? text + "\n" + rest.join("\n") : text);
      if (first) {
        first.focus();
      }
    }

    function values(cur) {
      var out = {};
      for (var i = 0; i < cur.fields.length; i++) {
        out[cur.fields[i].name] = cur.fields[i].value();
      }
      return out;
    }

    function outcome(action, q) {
      if (action === "accept") {
        return q.mode === "url" ? "You chose to go on; " + q.server + " was told." : "Your answer was sent to " + q.server + ".";
      }
      if (action === "decline") {
        return "You declined; " + q.server + " was told.";
      }
      return "You dismissed the question; " + q.server + " was told.";
    }

    // send answers the question shown with action (accept, decline,
    // cancel); an accept of a form carries its values.
    function send(action) {
      var cur = current;
      if (!cur || cur.busy) {
        return;
      }
      var body = { action: action };
      if (action === "accept" && cur.q.mode === "form") {
        body.values = values(cur);
      }
      cur.busy = true;
      setBusy(true);
      var again = function (text) {
        cur.busy = false;
        if (current === cur) {
          setBusy(false);
          showAlert(cur, text);
          if (!dialog.open) {
            dialog.showModal();
          }
        }
      };
      var finish = function (text) {
        sent[cur.q.id] = true;
        if (current === cur) {
          close();
        }
        say(text);
        showNext();
      };
      fetch(api + "/questions/" + encodeURIComponent(cur.q.id), {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body)
      }).then(function (resp) {
        if (resp.status === 204) {
          finish(outcome(action, cur.q));
          return;
        }
        return resp.json().catch(function () { return null; }).then(function (j) {
          var text = isObject(j) && typeof j.error === "string" ? j.error : "HTTP " + resp.status;
          if (resp.status === 422 && isObject(j) && Array.isArray(j.problems)) {
            again(text);
            showProblems(cur, text, j.problems);
          } else if (resp.status === 404) {
            finish(text);
          } else {
            again("Your answer was not sent: " + text);
          }
        });
      }).catch(function () {
        again("Your answer did not reach the service. Check your connection, then try again.");
      });
    }

    return Object.freeze({ callStarted: callStarted });
  }

  window.TeamsbotQuestions = Object.freeze({ start: start });
})();
