/* Chat gateway web widget: plain JS, no build step. Speaks docs/websocket-protocol.md.
 *
 * Embed: <script src="https://bot.example.com/static/widget.js" data-path="/ws" defer></script>
 * Optional attributes: data-url (full ws:// or wss:// URL), data-target (CSS selector of the element
 * to mount into; without it the widget appends itself to <body>).
 */
(function () {
  "use strict";

  var HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) { return HTML_ESCAPES[c]; });
  }

  function link(url, label) {
    return '<a href="' + escapeHtml(url) + '" rel="noopener noreferrer nofollow" target="_blank">' +
      escapeHtml(label) + "</a>";
  }

  // Safe markdown: every piece of the source is escaped before it becomes HTML. Code, links and
  // images are cut out first into numbered slots (so nothing inside them is reinterpreted); the
  // rest is escaped, then gets bold, italics and line breaks. Images are never loaded: a URL an
  // LLM writes into an image is a known way to leak the conversation to a third party.
  function renderMarkdown(source) {
    var slots = [];
    function keep(html) { return "\u0000" + (slots.push(html) - 1) + "\u0000"; }
    var text = String(source).replace(/\u0000/g, "");
    text = text.replace(/```[^\n`]*\n?([\s\S]*?)```/g, function (_, code) {
      return keep("<pre><code>" + escapeHtml(code) + "</code></pre>");
    });
    text = text.replace(/`([^`\n]+)`/g, function (_, code) {
      return keep("<code>" + escapeHtml(code) + "</code>");
    });
    text = text.replace(/!\[([^\]\n]*)\]\([^)\n]*\)/g, function (_, alt) {
      return keep(escapeHtml("[image" + (alt ? ": " + alt : "") + "]"));
    });
    // A label may hold slots (code, an image's text): they are filled in at the end, like the rest.
    text = text.replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s()<>"'\u0000]+)\)/g, function (_, label, url) {
      return keep(link(url, label));
    });
    text = text.replace(/https?:\/\/[^\s<>"'\u0000]*[^\s<>"'\u0000.,;:!?)\]]/g, function (url) {
      return keep(link(url, url));
    });
    text = escapeHtml(text)
      .replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^*\w])\*([^*\s][^*\n]*?)\*(?![*\w])/g, "$1<em>$2</em>")
      .replace(/(^|[^\w])_([^_\s][^_\n]*?)_(?!\w)/g, "$1<em>$2</em>")
      .replace(/\n/g, "<br>");
    // A slot may hold earlier slots (a link's label), so fill them until none is left.
    for (var depth = 0; depth <= slots.length && text.indexOf("\u0000") !== -1; depth++) {
      text = text.replace(/\u0000(\d+)\u0000/g, function (_, i) { return slots[Number(i)]; });
    }
    return text;
  }

  if (typeof document === "undefined") {  // loaded by the tests under node
    module.exports = { escapeHtml: escapeHtml, renderMarkdown: renderMarkdown };
    return;
  }

  var script = document.currentScript || document.querySelector("script[data-path],script[src*='widget.js']");
  var VISITOR_KEY = "chat-gateway.visitor_id";
  var VISITOR_RE = /^[A-Za-z0-9_-]{8,64}$/;

  function socketUrl() {
    if (script && script.dataset.url) return script.dataset.url;
    var base = new URL(script && script.src ? script.src : location.href, location.href);
    var path = (script && script.dataset.path) || window.CHAT_GATEWAY_WS_PATH || "/ws";
    return (base.protocol === "https:" ? "wss://" : "ws://") + base.host + path;
  }

  // Storage can throw (blocked cookies, sandboxed frames): then the visitor is new on each load.
  function loadVisitorId() {
    try { return localStorage.getItem(VISITOR_KEY); } catch (e) { return null; }
  }
  function saveVisitorId(id) {
    try { localStorage.setItem(VISITOR_KEY, id); } catch (e) { /* not persisted */ }
  }

  function randomId(prefix) {
    var bytes = new Uint8Array(8);
    crypto.getRandomValues(bytes);
    return prefix + Array.prototype.map.call(bytes, function (b) {
      return ("0" + b.toString(16)).slice(-2);
    }).join("");
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text) node.textContent = text;
    return node;
  }

  // --- the widget's elements
  var root = el("section", "cgw");
  root.setAttribute("aria-label", "Chat");
  var bar = el("div", "cgw-bar");
  var state = el("span", "cgw-state", "connecting…");
  var stopButton = el("button", "cgw-button", "Stop");
  var newButton = el("button", "cgw-button", "New conversation");
  stopButton.type = newButton.type = "button";
  bar.append(state, stopButton, newButton);
  var log = el("div", "cgw-log");
  log.setAttribute("role", "log");
  log.setAttribute("aria-live", "polite");
  var form = el("form", "cgw-form");
  var input = el("textarea", "cgw-input");
  input.rows = 2;
  input.placeholder = "Type a message… (Enter sends, Shift+Enter for a new line)";
  var sendButton = el("button", "cgw-button cgw-send", "Send");
  form.append(input, sendButton);
  root.append(bar, log, form);
  var target = script && script.dataset.target && document.querySelector(script.dataset.target);
  (target || document.body).append(root);

  // --- the transcript
  var bubbles = {};  // message_id -> element

  function show(node) {
    var atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    log.append(node);
    if (atBottom) log.scrollTop = log.scrollHeight;
    return node;
  }

  function status(text, kind) { return show(el("div", "cgw-status" + (kind ? " cgw-" + kind : ""), text)); }

  function bubble(messageId, text, done) {
    var node = bubbles[messageId];
    if (!node) node = bubbles[messageId] = show(el("div", "cgw-msg cgw-bot"));
    node.innerHTML = renderMarkdown(text || "…");
    node.classList.toggle("cgw-pending", !done);
    if (log.scrollHeight - log.scrollTop - log.clientHeight < 120) log.scrollTop = log.scrollHeight;
  }

  // --- display hints (cards, confirmations, alerts): built with textContent only, never HTML
  function hints(messageId, display) {
    var holder = bubbles[messageId];
    if (!holder || !Array.isArray(display)) return;
    display.forEach(function (hint) {
      var node = hint && hint.type === "card" ? hintCard(hint)
        : hint && hint.type === "confirm" ? hintBox("cgw-confirm", null, hint.text)
        : hint && hint.type === "alert" ? hintBox("cgw-alert cgw-alert-" + (hint.level || "info"), hint.title, hint.text)
        : null;
      if (!node) return;
      addButtons(node, hint.buttons, messageId);
      holder.append(node);
    });
  }

  function hintBox(className, title, text) {
    var box = el("div", "cgw-hint " + className);
    if (title) box.append(el("strong", "cgw-hint-title", title));
    if (text) box.append(el("div", "", text));
    return box;
  }

  function hintCard(hint) {
    var box = hintBox("cgw-card", hint.title, hint.subtitle);
    var rows = el("dl", "cgw-fields");
    (hint.fields || []).forEach(function (field) {
      rows.append(el("dt", "", field.label), el("dd", "", String(field.value)));
    });
    box.append(rows);
    // Only images we generated ourselves (data: URLs); a URL a model wrote could leak the chat.
    if (typeof hint.image === "string" && hint.image.indexOf("data:image/") === 0) {
      var image = el("img", "cgw-hint-image");
      image.src = hint.image;
      image.alt = hint.title || "";
      box.append(image);
    }
    return box;
  }

  function addButtons(box, buttons, messageId) {
    if (!Array.isArray(buttons) || !buttons.length) return;
    var row = el("div", "cgw-hint-buttons");
    buttons.forEach(function (b) {
      var button = el("button", "cgw-button cgw-" + (b.style || "secondary"), b.label);
      button.type = "button";
      button.addEventListener("click", function () {
        row.querySelectorAll("button").forEach(function (x) { x.disabled = true; });
        send({ type: "action", action_id: b.action_id, value: b.value, label: b.label, message_id: messageId });
      });
      row.append(button);
    });
    box.append(row);
  }

  // --- the connection
  var ws = null, ready = false, lastSeq = null, backoff = 500, outbox = [], stopped = false;
  var unanswered = {};  // client_message_id -> message frame, until a reply names it

  function send(frame) {
    if (frame.type === "message" && frame.client_message_id) unanswered[frame.client_message_id] = frame;
    if (ws && ready) ws.send(JSON.stringify(frame));
    else outbox.push(frame);  // resent after the next ready; client_message_id keeps it idempotent
  }

  function resendUnanswered() {  // after try_later: the server kept nothing, and dedups resends
    Object.keys(unanswered).forEach(function (id) { send(unanswered[id]); });
  }

  function handle(frame) {
    if (frame.type === "ready") {
      ready = true;
      backoff = 500;
      saveVisitorId(frame.visitor_id);
      if (lastSeq === null || frame.seq < lastSeq) lastSeq = frame.seq;  // fresh page, or server forgot
      state.textContent = "connected";
      root.classList.remove("cgw-offline");
      outbox.splice(0).forEach(function (f) { if (f.type !== "message") send(f); });
      resendUnanswered();  // queued ones, and any the server may not have taken
      return;
    }
    if (typeof frame.seq === "number") {
      if (lastSeq !== null && frame.seq <= lastSeq) return;  // already shown before a reconnect
      lastSeq = frame.seq;
    }
    if (frame.type === "message.created" && frame.reply_to) delete unanswered[frame.reply_to];
    if (frame.type === "message.created" || frame.type === "message.updated") bubble(frame.message_id, frame.text, false);
    else if (frame.type === "message.completed") {
      bubble(frame.message_id, frame.text, true);
      hints(frame.message_id, frame.display || []);
    }
    else if (frame.type === "agent.started") status("⚙ " + (frame.subagent_type || "agent") + ": " + (frame.description || "working") + "…");
    else if (frame.type === "agent.finished") status("✓ " + (frame.subagent_type || "agent") + " " + (frame.status || "finished"));
    else if (frame.type === "error" && frame.code === "try_later") {
      status("the server is busy; retrying…", "error");
      if (ready) setTimeout(resendUnanswered, frame.retry_after_ms || 2000);  // else: on reconnect
    }
    else if (frame.type === "error") status(frame.message || frame.code || "error", "error");
  }

  function connect() {
    ready = false;
    ws = new WebSocket(socketUrl());
    ws.onopen = function () {
      var hello = { type: "hello" };
      var visitorId = loadVisitorId();
      if (visitorId && VISITOR_RE.test(visitorId)) hello.visitor_id = visitorId;
      if (lastSeq !== null) hello.resume_after = lastSeq;
      ws.send(JSON.stringify(hello));
    };
    ws.onmessage = function (event) {
      var frame;
      try { frame = JSON.parse(event.data); } catch (e) { return; }
      if (frame && typeof frame.type === "string") handle(frame);
    };
    ws.onclose = function (event) {
      ready = false;
      root.classList.add("cgw-offline");
      if (event.code === 4003) {  // identity refused: retrying cannot help
        stopped = true;
        state.textContent = "signed identity refused";
        return;
      }
      var delay = backoff + Math.random() * backoff / 2;
      backoff = Math.min(backoff * 2, 30000);
      state.textContent = "reconnecting…";
      setTimeout(connect, delay);
    };
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var text = input.value;
    if (!text.trim() || stopped) return;
    input.value = "";
    show(el("div", "cgw-msg cgw-user", text));
    send({ type: "message", text: text, client_message_id: randomId("c_") });
  });
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  stopButton.addEventListener("click", function () { send({ type: "stop" }); });
  newButton.addEventListener("click", function () {
    log.replaceChildren();
    bubbles = {};
    status("New conversation");
    send({ type: "message", text: "/new", client_message_id: randomId("c_") });
  });

  connect();
})();
