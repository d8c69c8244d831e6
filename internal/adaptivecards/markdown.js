// The markdown of Adaptive Card text, as Teams renders it: paragraphs and
// line breaks, "- " and "1. " lists, **bold** and __bold__, *italic* and
// _italic_, `code`, and [text](url) links to https, http and mailto
// addresses. The renderer writes what this returns into the page as HTML
// (its "markdownPassthrough" Trusted Types policy), so every character of
// the card's text is escaped here before any tag is added, and the only
// tags this writes are p, br, ul, ol, li, strong, em, code and a (with an
// href checked by safeURL).

function escape(s) {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// safeURL returns the absolute address of u when it is https, http or
// mailto, and "" otherwise (javascript:, data: and the like).
export function safeURL(u) {
  try {
    const url = new URL(String(u), window.location.href);
    if (url.protocol === "https:" || url.protocol === "http:" || url.protocol === "mailto:") {
      return url.href;
    }
  } catch (e) {
    // not an address
  }
  return "";
}

const INLINE = /(\*\*([^*]+)\*\*|__([^_]+)__|\[([^\]]+)\]\(([^)\s]+)\)|`([^`]+)`|\*([^*\s][^*]*)\*|(^|[\s(])_([^_\s][^_]*)_)/;

// inline writes s's inline markdown as escaped HTML.
function inline(s) {
  let out = "";
  while (s.length > 0) {
    const m = INLINE.exec(s);
    if (!m) {
      return out + escape(s);
    }
    const lead = m[9] !== undefined ? m[8] : "";
    out += escape(s.slice(0, m.index) + lead);
    if (m[2] !== undefined || m[3] !== undefined) {
      out += "<strong>" + inline(m[2] !== undefined ? m[2] : m[3]) + "</strong>";
    } else if (m[4] !== undefined) {
      const href = safeURL(m[5]);
      out += href ? '<a href="' + escape(href) + '" rel="noopener noreferrer">' + inline(m[4]) + "</a>" : inline(m[4]);
    } else if (m[6] !== undefined) {
      out += "<code>" + escape(m[6]) + "</code>";
    } else {
      out += "<em>" + inline(m[7] !== undefined ? m[7] : m[9]) + "</em>";
    }
    s = s.slice(m.index + m[0].length);
  }
  return out;
}

// markdown writes a text's markdown as HTML.
export function markdown(text) {
  const lines = String(text).split(/\r?\n/);
  let out = "";
  let para = [];
  let list = "";
  const flush = () => {
    if (para.length) {
      out += "<p>" + para.map(inline).join("<br>") + "</p>";
      para = [];
    }
  };
  const closeList = () => {
    if (list) {
      out += "</" + list + ">";
      list = "";
    }
  };
  for (const line of lines) {
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const number = /^\s*(\d{1,3})[.)]\s+(.*)$/.exec(line);
    if (bullet || number) {
      flush();
      const tag = bullet ? "ul" : "ol";
      if (list !== tag) {
        closeList();
        out += "<" + tag + ">";
        list = tag;
      }
      out += "<li>" + inline(bullet ? bullet[1] : number[2]) + "</li>";
      continue;
    }
    closeList();
    if (line.trim() === "") {
      flush();
    } else {
      para.push(line);
    }
  }
  flush();
  closeList();
  return out;
}
