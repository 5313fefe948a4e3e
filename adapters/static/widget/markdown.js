/* The widget's safe markdown and the other pure helpers: no DOM, so node can test them
 * (tests/test_widget_markdown.py requires this file). */

var HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, function (c) { return HTML_ESCAPES[c]; });
}

function link(url, label) {
  return '<a href="' + escapeHtml(url) + '" rel="noopener noreferrer nofollow" target="_blank">' +
    escapeHtml(label) + "</a>";
}

// Inline SVG icons (24×24, stroked): nothing depends on an emoji font.
var ICONS = {
  chat: "M4 5h16v11H9l-5 4z",
  close: "M6 6l12 12M18 6L6 18",
  send: "M4 12l16-8-6 16-3-6z",
  stop: "M7 7h10v10H7z",
  plus: "M12 5v14M5 12h14",
  compose: "M4 20h4L19 9l-4-4L4 16zM13.5 6.5l4 4",
  tool: "M14.5 4a4.5 4.5 0 0 0-4.3 5.8L4 16v4h4l6.2-6.2A4.5 4.5 0 1 0 14.5 4z",
  agent: "M12 3a4 4 0 1 1 0 8 4 4 0 0 1 0-8zM4 21c0-4 4-6 8-6s8 2 8 6",
  check: "M5 12l5 5L19 7",
  clock: "M12 7v5l3 2M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18z",
  alert: "M12 9v4M12 16.5v.5M12 3l9.5 17h-19z",
  retry: "M4 12a8 8 0 1 0 2.3-5.7M4 4v4h4",
  clip: "M20 11.5l-8.2 8.2a5 5 0 0 1-7-7L13 4.5a3.3 3.3 0 0 1 4.7 4.7l-8.2 8.2a1.7 1.7 0 0 1-2.4-2.4L14.6 7.5",
  mic: "M12 3a3 3 0 0 1 3 3v6a3 3 0 0 1-6 0V6a3 3 0 0 1 3-3zM5 11a7 7 0 0 0 14 0M12 18v3",
  file: "M6 3h8l4 4v14H6zM14 3v4h4"
};
// The few symbols the server itself writes ("⏹ Stopped.", "⏳ research — …", "🔧 …").
var TEXT_ICONS = { "\u23F9": "stop", "\u23F3": "clock", "\uD83D\uDD27": "tool", "\u2699": "tool",
  "\u2713": "check", "\u2705": "check", "\u26A0": "alert" };
var TEXT_ICON_RE = /(\u23F9|\u23F3|\uD83D\uDD27|\u2699|\u2713|\u2705|\u26A0)\uFE0F?/g;

function iconHtml(name) {
  return '<svg class="cgw-icon" viewBox="0 0 24 24" aria-hidden="true" focusable="false"><path d="' +
    ICONS[name] + '"/></svg>';
}

// Safe markdown: every piece of the source is escaped before it becomes HTML. Code, links and
// images are cut out first into numbered slots (so nothing inside them is reinterpreted); the
// rest is read line by line into blocks (headings, lists, tables, quotes, rules: the constructs
// adapters/markdown.py reads for the other channels), and each block's text is escaped, then gets
// bold, italics, strikethrough and line breaks. Block markup is only ever built here around text
// already escaped, and its attributes are fixed values or digits. Remote images are shown as text
// unless the site turned them on (data-images="load"): a URL a model writes into an image is a
// known way to leak the conversation to a third party.
function renderMarkdown(source, options) {
  var loadImages = !!(options && options.images);
  var slots = [];
  function keep(html) { return "\u0000" + (slots.push(html) - 1) + "\u0000"; }
  var text = String(source).replace(/\u0000/g, "").replace(/\r\n?/g, "\n");
  text = text.replace(/```[^\n`]*\n?([\s\S]*?)```/g, function (_, code) {
    return keep("<pre><code>" + escapeHtml(code) + "</code></pre>");
  });
  text = text.replace(/`([^`\n]+)`/g, function (_, code) {
    return keep("<code>" + escapeHtml(code) + "</code>");
  });
  text = text.replace(/!\[([^\]\n]*)\]\(([^)\n]*)\)/g, function (_, alt, url) {
    if (loadImages && /^https:\/\/[^\s()<>"']+$/.test(url)) {
      return keep('<img src="' + escapeHtml(url) + '" alt="' + escapeHtml(alt) +
        '" referrerpolicy="no-referrer" loading="lazy">');
    }
    return keep(escapeHtml("[image" + (alt ? ": " + alt : "") + "]"));
  });
  // A label may hold slots (code, an image's text): they are filled in at the end, like the rest.
  text = text.replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s()<>"'\u0000]+)\)/g, function (_, label, url) {
    return keep(link(url, label));
  });
  text = text.replace(/https?:\/\/[^\s<>"'\u0000|]*[^\s<>"'\u0000|.,;:!?)\]]/g, function (url) {
    return keep(link(url, url));
  });
  text = renderBlocks(text.split("\n"));
  // A slot may hold earlier slots (a link's label), so fill them until none is left.
  for (var depth = 0; depth <= slots.length && text.indexOf("\u0000") !== -1; depth++) {
    text = text.replace(/\u0000(\d+)\u0000/g, function (_, i) { return slots[Number(i)]; });
  }
  return text;
}

// One line of text (or several, joined by line breaks): escaped first, then its spans.
function renderInline(text) {
  return escapeHtml(text)
    .replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>")
    .replace(/~~([^~\n]+)~~/g, "<del>$1</del>")
    .replace(/(^|[^*\w])\*([^*\s][^*\n]*?)\*(?![*\w])/g, "$1<em>$2</em>")
    .replace(/(^|[^\w])_([^_\s][^_\n]*?)_(?!\w)/g, "$1<em>$2</em>")
    .replace(TEXT_ICON_RE, function (_, symbol) { return iconHtml(TEXT_ICONS[symbol]); })
    // a date is one word: "2026-" at a line's end and "12-02" on the next is hard to read
    .replace(/\b\d{4}-\d{2}-\d{2}\b/g, '<span class="cgw-nowrap">$&</span>')
    .replace(/\n/g, "<br>");
}

var HEADING_RE = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
var RULE_RE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
var ITEM_RE = /^( *)([-+*]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
var QUOTE_RE = /^ {0,3}> ?(.*)$/;
var DELIMITER_RE = /^ *\|? *:?-+:? *(\| *:?-+:? *)*\|? *$/;

// Lines (code and links already in slots) into blocks. Plain lines keep the chat's own look:
// line breaks stay breaks, a blank line a gap; a block needs no break around it.
function renderBlocks(lines) {
  var out = [], plain = [], i = 0;
  function flush() {
    while (plain.length && !plain[0].trim()) plain.shift();
    while (plain.length && !plain[plain.length - 1].trim()) plain.pop();
    if (plain.length) out.push(renderInline(plain.join("\n")));
    plain = [];
  }
  function block(html) { flush(); out.push(html); }
  while (i < lines.length) {
    var line = lines[i], match;
    if ((match = HEADING_RE.exec(line))) {
      var level = match[1].length;
      block("<h" + level + ">" + renderInline(match[2] || "") + "</h" + level + ">");
      i++;
    } else if (plain.length && plain[plain.length - 1].trim() && /^ {0,3}(=+|-+)[ \t]*$/.test(line)) {
      var setext = line.trim()[0] === "=" ? 1 : 2, title = [];  // the paragraph above is its text
      while (plain.length && plain[plain.length - 1].trim()) title.unshift(plain.pop());
      block("<h" + setext + ">" + renderInline(title.join("\n")) + "</h" + setext + ">");
      i++;
    } else if (RULE_RE.test(line)) {
      block("<hr>");
      i++;
    } else if (QUOTE_RE.test(line)) {
      var quoted = [];
      while (i < lines.length && (match = QUOTE_RE.exec(lines[i]))) { quoted.push(match[1]); i++; }
      block("<blockquote>" + renderBlocks(quoted) + "</blockquote>");
    } else if (line.indexOf("|") !== -1 && i + 1 < lines.length && DELIMITER_RE.test(lines[i + 1]) &&
        lines[i + 1].indexOf("-") !== -1 && cells(line).length === cells(lines[i + 1]).length) {
      var rows = [cells(line)], aligns = cells(lines[i + 1]).map(alignment);
      i += 2;
      while (i < lines.length && lines[i].trim() && !blockStart(lines[i])) rows.push(cells(lines[i++]));
      block(renderTable(rows, aligns));
    } else if (ITEM_RE.test(line) && (plain.length === 0 || !plain[plain.length - 1].trim() ||
        /^ *(?:[-+*]|1[.)])[ \t]+\S/.test(line))) {  // as CommonMark: a list interrupts a paragraph
      flush();
      i = renderList(lines, i, out);
    } else {
      plain.push(line);
      i++;
    }
  }
  flush();
  return out.join("");
}

function blockStart(line) {
  return HEADING_RE.test(line) || RULE_RE.test(line) || QUOTE_RE.test(line);
}

// A list from lines[start], its items' nested lists by indentation; returns the next line.
function renderList(lines, start, out) {
  var first = ITEM_RE.exec(lines[start]), indent = first[1].length;
  var ordered = /\d/.test(first[2]), marker = first[2].slice(-1);
  var number = ordered ? parseInt(first[2], 10) : 1;
  var items = [], i = start;
  while (i < lines.length) {
    var match = ITEM_RE.exec(lines[i]);
    if (!match || match[1].length !== indent || /\d/.test(match[2]) !== ordered ||
        match[2].slice(-1) !== marker || RULE_RE.test(lines[i])) break;
    var body = [match[3] || ""], inner = indent + match[2].length + 1;
    i++;
    // The item goes on while lines are indented past its marker (a blank line between is kept).
    while (i < lines.length) {
      var next = lines[i], lead = next.length - next.replace(/^ +/, "").length;
      if (next.trim() && lead >= Math.min(inner, indent + 2)) { body.push(next.slice(Math.min(lead, inner))); i++; continue; }
      if (!next.trim() && i + 1 < lines.length && lines[i + 1].trim() &&
          lines[i + 1].length - lines[i + 1].replace(/^ +/, "").length >= Math.min(inner, indent + 2)) {
        body.push(""); i++; continue;
      }
      if (next.trim() && !ITEM_RE.test(next) && !blockStart(next) && body[body.length - 1].trim()) {
        body.push(next.trim()); i++; continue;  // a lazy continuation of the item's paragraph
      }
      break;
    }
    items.push("<li>" + renderBlocks(body) + "</li>");
    // A blank line between two items of the same list keeps the list going.
    if (i + 1 < lines.length && !lines[i].trim()) {
      var after = ITEM_RE.exec(lines[i + 1]);
      if (after && after[1].length === indent && /\d/.test(after[2]) === ordered) i++;
    }
  }
  var tag = ordered ? "ol" : "ul";
  out.push("<" + tag + (ordered && number !== 1 ? ' start="' + number + '"' : "") + ">" +
    items.join("") + "</" + tag + ">");
  return i;
}

// A table row's cells: split at each pipe that is not escaped, the outer pipes dropped.
function cells(line) {
  var row = line.replace(/\u0001/g, "").replace(/\\\|/g, "\u0001").trim();
  row = row.replace(/^\|/, "").replace(/\|$/, "");
  return row.split("|").map(function (cell) { return cell.trim().replace(/\u0001/g, "|"); });
}

function alignment(delimiter) {
  var left = delimiter[0] === ":", right = delimiter[delimiter.length - 1] === ":";
  return left && right ? "center" : right ? "right" : left ? "left" : "";
}

function renderTable(rows, aligns) {
  function row(cellsOfRow, tag) {
    return "<tr>" + aligns.map(function (align, column) {
      return "<" + tag + (align ? ' style="text-align: ' + align + '"' : "") + ">" +
        renderInline(cellsOfRow[column] || "") + "</" + tag + ">";
    }).join("") + "</tr>";
  }
  var body = rows.slice(1).map(function (cellsOfRow) { return row(cellsOfRow, "td"); }).join("");
  return '<div class="cgw-table"><table><thead>' + row(rows[0], "th") + "</thead>" +
    (body ? "<tbody>" + body + "</tbody>" : "") + "</table></div>";
}

// Streaming text stops mid-markup ("**bo", "[docs](https://ex"): close or hide what is open so
// no raw marker flashes before its closing half arrives.
function settleMarkdown(text) {
  text = String(text);
  if ((text.match(/```/g) || []).length % 2) return text + "\n```";
  var fence = text.lastIndexOf("```");
  var head = fence === -1 ? "" : text.slice(0, fence + 3);
  var tail = fence === -1 ? text : text.slice(fence + 3);
  if ((tail.match(/`/g) || []).length % 2) tail = dropLast(tail, "`");
  tail = tail.replace(/!?\[([^\]\n]*)\]\([^)\n]*$/, "$1").replace(/!?\[([^\]\n]*)$/, "$1");
  if ((tail.match(/\*\*/g) || []).length % 2) tail = dropLast(tail, "**");
  tail = tail.replace(/(^|[^*\w])\*(?=[^*\s])([^*\n]*)$/, "$1$2").replace(/(^|\s)\*+$/, "$1");
  tail = tail.replace(/(^|[^\w])_(?=[^_\s])([^_\n]*)$/, "$1$2");
  return head + tail;
}

function dropLast(text, marker) {
  var at = text.lastIndexOf(marker);
  return text.slice(0, at) + text.slice(at + marker.length);
}

// The placeholder's text carries the tool and specialist lines for plain clients ("🔧 …",
// "⏳ …" at its end); the widget shows them from their own frames instead.
function withoutStatusLines(text) {
  var lines = String(text).split("\n");
  while (lines.length && /^(\uD83D\uDD27|\u23F3) /.test(lines[lines.length - 1])) lines.pop();
  return lines.join("\n").replace(/\s+$/, "");
}

function contrast(a, b) {
  function lum(hex) {
    var rgb = [1, 3, 5].map(function (i) {
      var c = parseInt(hex.slice(i, i + 2), 16) / 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2];
  }
  var x = lum(a), y = lum(b);
  return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
}


// node (the tests); in a browser a page's own global `module` must not be touched
if (typeof document === "undefined" && typeof module !== "undefined") {
  module.exports = { escapeHtml: escapeHtml, renderMarkdown: renderMarkdown,
    settleMarkdown: settleMarkdown, withoutStatusLines: withoutStatusLines, contrast: contrast };
}
