// A small Adaptive Card renderer for the playground. It lays out the
// elements the bot's cards use (package cards and its golden files) the way
// Teams shows them: TextBlock with Teams' markdown subset (bold, italic,
// lists, links), RichTextBlock and TextRun, Container with its styles,
// ColumnSet and Column, FactSet, Image (data: URLs only, as the page's CSP
// allows), ActionSet and the card's actions (Action.OpenUrl,
// Action.ToggleVisibility, Action.ShowCard; Action.Submit and
// Action.Execute are shown but do nothing here), spacing, separators and
// isVisible, and the DATE() and TIME() functions of text. Everything is
// built with DOM calls and textContent: no string from a card ever reaches
// an HTML sink, which the page's Trusted Types policy enforces too. It
// defines one global, TeamsbotCards, whose render returns a card's element.
(function () {
  "use strict";

  function isObject(m) {
    return m !== null && typeof m === "object" && !Array.isArray(m);
  }

  function el(tag, cls) {
    var e = document.createElement(tag);
    if (cls) {
      e.className = cls;
    }
    return e;
  }

  function lower(v) {
    return typeof v === "string" ? v.toLowerCase() : "";
  }

  // Teams writes DATE() and TIME() in the reader's own time zone.
  var FUNC = /\{\{(DATE|TIME)\(([^,)]+)(?:,\s*(SHORT|LONG|COMPACT))?\)\}\}/g;

  function expandFunctions(s) {
    return s.replace(FUNC, function (whole, fn, iso, style) {
      var d = new Date(iso.trim());
      if (isNaN(d.getTime())) {
        return whole;
      }
      if (fn === "TIME") {
        return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
      }
      if (style === "LONG") {
        return d.toLocaleDateString(undefined, { weekday: "long", year: "numeric", month: "long", day: "numeric" });
      }
      if (style === "SHORT") {
        return d.toLocaleDateString(undefined, { weekday: "short", year: "numeric", month: "short", day: "numeric" });
      }
      return d.toLocaleDateString();
    });
  }

  function safeURL(u) {
    try {
      var url = new URL(String(u), window.location.href);
      if (url.protocol === "https:" || url.protocol === "http:" || url.protocol === "mailto:") {
        return url.href;
      }
    } catch (e) {}
    return "";
  }

  function link(text, href) {
    var a = el("a");
    a.textContent = text;
    a.href = href;
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    return a;
  }

  // inline appends the inline markdown of s to parent: **bold**,
  // __bold__, _italic_, *italic*, `code`, [text](url).
  var INLINE = /(\*\*([^*]+)\*\*|__([^_]+)__|\[([^\]]+)\]\(([^)\s]+)\)|`([^`]+)`|\*([^*\s][^*]*)\*|(^|[\s(])_([^_\s][^_]*)_)/;

  function inline(parent, s) {
    while (s.length > 0) {
      var m = INLINE.exec(s);
      if (!m) {
        parent.appendChild(document.createTextNode(s));
        return;
      }
      var start = m.index;
      var lead = "";
      if (m[9] !== undefined) {
        lead = m[8];
      }
      if (start + lead.length > 0) {
        parent.appendChild(document.createTextNode(s.slice(0, start) + lead));
      }
      if (m[2] !== undefined || m[3] !== undefined) {
        var b = el("strong");
        inline(b, m[2] !== undefined ? m[2] : m[3]);
        parent.appendChild(b);
      } else if (m[4] !== undefined) {
        var href = safeURL(m[5]);
        if (href) {
          parent.appendChild(link(m[4], href));
        } else {
          parent.appendChild(document.createTextNode(m[4]));
        }
      } else if (m[6] !== undefined) {
        var c = el("code");
        c.textContent = m[6];
        parent.appendChild(c);
      } else {
        var i = el("em");
        inline(i, m[7] !== undefined ? m[7] : m[9]);
        parent.appendChild(i);
      }
      s = s.slice(start + m[0].length);
    }
  }

  // markdown lays out a TextBlock's text: paragraphs, "- " and "1. "
  // lists, and inline markdown.
  function markdown(parent, text) {
    var lines = expandFunctions(text).split(/\r?\n/);
    var para = [];
    var list = null;
    function flushPara() {
      if (para.length) {
        var p = el("p");
        for (var i = 0; i < para.length; i++) {
          if (i > 0) {
            p.appendChild(el("br"));
          }
          inline(p, para[i]);
        }
        parent.appendChild(p);
        para = [];
      }
    }
    for (var i = 0; i < lines.length; i++) {
      var line = lines[i];
      var bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
      var number = /^\s*(\d{1,3})[.)]\s+(.*)$/.exec(line);
      if (bullet || number) {
        flushPara();
        var tag = bullet ? "ul" : "ol";
        if (!list || list.tagName.toLowerCase() !== tag) {
          list = el(tag);
          parent.appendChild(list);
        }
        var li = el("li");
        inline(li, bullet ? bullet[1] : number[2]);
        list.appendChild(li);
        continue;
      }
      list = null;
      if (line.trim() === "") {
        flushPara();
      } else {
        para.push(line);
      }
    }
    flushPara();
  }

  function textClasses(e, o) {
    if (o.isSubtle === true) {
      e.classList.add("ac-subtle");
    }
    var w = lower(o.weight);
    if (w === "bolder" || w === "lighter") {
      e.classList.add("ac-weight-" + w);
    }
    var s = lower(o.size);
    if (s === "small" || s === "medium" || s === "large" || s === "extralarge") {
      e.classList.add("ac-size-" + s);
    }
    var c = lower(o.color);
    if (c === "attention" || c === "good" || c === "warning" || c === "accent") {
      e.classList.add("ac-color-" + c);
    }
  }

  function common(e, o) {
    var sp = lower(o.spacing);
    if (sp === "none" || sp === "small" || sp === "medium" || sp === "large" || sp === "extralarge") {
      e.classList.add("ac-spacing-" + sp);
    }
    if (o.separator === true) {
      e.classList.add("ac-separator");
    }
    var a = lower(o.horizontalAlignment);
    if (a === "center" || a === "right") {
      e.classList.add("ac-align-" + a);
    }
    if (typeof o.id === "string" && o.id !== "") {
      e.setAttribute("data-ac-id", o.id);
    }
    if (o.isVisible === false) {
      e.hidden = true;
    }
    return e;
  }

  function textBlock(o) {
    var e = el("div", "ac-el ac-text");
    textClasses(e, o);
    if (o.wrap !== true) {
      e.classList.add("ac-nowrap");
    }
    markdown(e, typeof o.text === "string" ? o.text : "");
    return e;
  }

  function richTextBlock(o) {
    var e = el("div", "ac-el ac-text");
    var p = el("p");
    var inlines = Array.isArray(o.inlines) ? o.inlines : [];
    for (var i = 0; i < inlines.length; i++) {
      var r = inlines[i];
      if (typeof r === "string") {
        r = { type: "TextRun", text: r };
      }
      if (!isObject(r) || r.type !== "TextRun" || typeof r.text !== "string") {
        continue;
      }
      var span = el("span");
      textClasses(span, r);
      if (r.italic === true) {
        span.style.fontStyle = "italic";
      }
      if (r.strikethrough === true) {
        span.style.textDecoration = "line-through";
      }
      span.textContent = expandFunctions(r.text);
      p.appendChild(span);
    }
    e.appendChild(p);
    return e;
  }

  function container(o, ctx, cls) {
    var e = el("div", "ac-el " + (cls || "ac-container"));
    var st = lower(o.style);
    if (st === "emphasis" || st === "accent" || st === "good" || st === "attention" || st === "warning") {
      e.classList.add("ac-style", "ac-style-" + st);
    }
    elements(e, o.items, ctx);
    if (isObject(o.selectAction)) {
      e.style.cursor = "pointer";
      e.addEventListener("click", function () {
        runAction(o.selectAction, ctx, e);
      });
    }
    return e;
  }

  function columnSet(o, ctx) {
    var e = el("div", "ac-el ac-columnset");
    var cols = Array.isArray(o.columns) ? o.columns : [];
    for (var i = 0; i < cols.length; i++) {
      if (!isObject(cols[i])) {
        continue;
      }
      var c = container(cols[i], ctx, "ac-column");
      c.classList.remove("ac-el");
      if (cols[i].width === "auto") {
        c.classList.add("ac-column-auto");
      } else if (typeof cols[i].width === "number" && cols[i].width > 0) {
        c.style.flex = String(cols[i].width) + " 1 0";
      }
      common(c, cols[i]);
      e.appendChild(c);
    }
    return e;
  }

  function factSet(o) {
    var t = el("table", "ac-el ac-factset");
    var facts = Array.isArray(o.facts) ? o.facts : [];
    for (var i = 0; i < facts.length; i++) {
      var f = facts[i];
      if (!isObject(f)) {
        continue;
      }
      var tr = el("tr");
      var th = el("th");
      th.textContent = expandFunctions(String(f.title || ""));
      var td = el("td", "ac-text");
      markdown(td, String(f.value || ""));
      tr.appendChild(th);
      tr.appendChild(td);
      t.appendChild(tr);
    }
    return t;
  }

  function image(o) {
    var href = String(o.url || "");
    if (href.indexOf("data:image/") !== 0) {
      // The page loads nothing from elsewhere; Teams would show the image.
      var s = el("div", "ac-el ac-unsupported");
      s.textContent = "[image" + (o.altText ? ": " + o.altText : "") + "]";
      return s;
    }
    var img = el("img", "ac-el");
    img.src = href;
    img.alt = String(o.altText || "");
    img.style.maxWidth = "100%";
    return img;
  }

  // runAction does what Teams does for an action, as far as the
  // playground can: open a link, toggle elements, show a card.
  function runAction(a, ctx, button) {
    switch (a.type) {
      case "Action.OpenUrl": {
        var href = safeURL(a.url);
        if (href) {
          window.open(href, "_blank", "noopener,noreferrer");
        }
        return;
      }
      case "Action.ToggleVisibility": {
        var targets = Array.isArray(a.targetElements) ? a.targetElements : [];
        for (var i = 0; i < targets.length; i++) {
          var t = targets[i];
          var id = isObject(t) ? t.elementId : t;
          var want = isObject(t) && typeof t.isVisible === "boolean" ? t.isVisible : null;
          var nodes = ctx.root.querySelectorAll("[data-ac-id]");
          for (var j = 0; j < nodes.length; j++) {
            if (nodes[j].getAttribute("data-ac-id") === String(id)) {
              nodes[j].hidden = want === null ? !nodes[j].hidden : !want;
            }
          }
        }
        if (button) {
          button.setAttribute("aria-expanded", "true");
        }
        return;
      }
      default:
        if (ctx.onAction) {
          ctx.onAction(a);
        }
    }
  }

  function action(a, ctx, showCards) {
    var label = typeof a.title === "string" && a.title !== "" ? a.title : "Open";
    var style = lower(a.style);
    var cls = "ac-action" + (style === "positive" || style === "destructive" ? " ac-action-" + style : "");
    if (a.type === "Action.OpenUrl") {
      var href = safeURL(a.url);
      if (href) {
        var l = link(label, href);
        l.className = cls;
        return l;
      }
    }
    var b = el("button", cls);
    b.type = "button";
    b.textContent = label;
    if (a.type === "Action.ShowCard" && isObject(a.card)) {
      var inner = render(a.card, ctx);
      inner.hidden = true;
      showCards.push(inner);
      b.addEventListener("click", function () {
        inner.hidden = !inner.hidden;
      });
      return b;
    }
    if (a.type === "Action.Submit" || a.type === "Action.Execute") {
      b.title = "Teams would send this to the bot; the playground does not.";
    }
    b.addEventListener("click", function () {
      runAction(a, ctx, b);
    });
    return b;
  }

  function actionSet(actions, ctx) {
    var wrap = el("div", "ac-el");
    var row = el("div", "ac-actions");
    var showCards = [];
    for (var i = 0; i < actions.length; i++) {
      if (isObject(actions[i])) {
        row.appendChild(action(actions[i], ctx, showCards));
      }
    }
    wrap.appendChild(row);
    for (var k = 0; k < showCards.length; k++) {
      wrap.appendChild(showCards[k]);
    }
    return wrap;
  }

  function element(o, ctx) {
    switch (o.type) {
      case "TextBlock":
        return textBlock(o);
      case "RichTextBlock":
        return richTextBlock(o);
      case "Container":
        return container(o, ctx);
      case "ColumnSet":
        return columnSet(o, ctx);
      case "FactSet":
        return factSet(o);
      case "Image":
        return image(o);
      case "ActionSet":
        return actionSet(Array.isArray(o.actions) ? o.actions : [], ctx);
      default:
        return null;
    }
  }

  function elements(parent, list, ctx) {
    if (!Array.isArray(list)) {
      return;
    }
    for (var i = 0; i < list.length; i++) {
      var o = list[i];
      if (!isObject(o)) {
        continue;
      }
      var e = element(o, ctx);
      if (e === null) {
        // Teams drops an element it does not know, or shows its fallback.
        if (isObject(o.fallback)) {
          e = element(o.fallback, ctx);
        }
        if (e === null) {
          continue;
        }
      }
      parent.appendChild(common(e, o));
    }
  }

  // render lays out an AdaptiveCard object. opts.onAction, when set, is
  // called for actions the playground cannot carry out.
  function render(card, opts) {
    var ctx = opts && opts.root ? opts : { onAction: opts && opts.onAction };
    var e = el("div", "ac-card");
    if (!ctx.root) {
      ctx.root = e;
    }
    if (!isObject(card) || card.type !== "AdaptiveCard") {
      e.classList.add("ac-unsupported");
      e.textContent = "This card cannot be shown.";
      return e;
    }
    elements(e, card.body, ctx);
    if (Array.isArray(card.actions) && card.actions.length > 0) {
      e.appendChild(actionSet(card.actions, ctx));
    }
    return e;
  }

  window.TeamsbotCards = Object.freeze({ render: render });
})();
