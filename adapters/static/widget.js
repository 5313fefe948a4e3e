/* Chat gateway web widget: one <script> tag, plain JavaScript, no framework, no build step.
 * Speaks docs/websocket-protocol.md; the README lists its data- options.
 *
 *   <script src="https://bot.example.com/static/widget.js" data-title="Help" defer></script>
 *
 * It lives in a Shadow DOM (the page's CSS cannot reach in, its own cannot leak out), loads
 * widget.css from beside itself, and shows the server's transcript: on a reload, in a second tab
 * or on another page of the site, the same conversation, the user's messages included.
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

  // Inline SVG icons (24×24, stroked): nothing depends on an emoji font.
  var ICONS = {
    chat: "M4 5h16v11H9l-5 4z",
    close: "M6 6l12 12M18 6L6 18",
    send: "M4 12l16-8-6 16-3-6z",
    stop: "M7 7h10v10H7z",
    plus: "M12 5v14M5 12h14",
    tool: "M14.5 4a4.5 4.5 0 0 0-4.3 5.8L4 16v4h4l6.2-6.2A4.5 4.5 0 1 0 14.5 4z",
    agent: "M12 3a4 4 0 1 1 0 8 4 4 0 0 1 0-8zM4 21c0-4 4-6 8-6s8 2 8 6",
    check: "M5 12l5 5L19 7",
    clock: "M12 7v5l3 2M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18z",
    alert: "M12 9v4M12 16.5v.5M12 3l9.5 17h-19z",
    retry: "M4 12a8 8 0 1 0 2.3-5.7M4 4v4h4"
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
  // rest is escaped, then gets bold, italics and line breaks. Remote images are shown as text
  // unless the site turned them on (data-images="load"): a URL a model writes into an image is a
  // known way to leak the conversation to a third party.
  function renderMarkdown(source, options) {
    var loadImages = !!(options && options.images);
    var slots = [];
    function keep(html) { return "\u0000" + (slots.push(html) - 1) + "\u0000"; }
    var text = String(source).replace(/\u0000/g, "");
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
    text = text.replace(/https?:\/\/[^\s<>"'\u0000]*[^\s<>"'\u0000.,;:!?)\]]/g, function (url) {
      return keep(link(url, url));
    });
    text = escapeHtml(text)
      .replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^*\w])\*([^*\s][^*\n]*?)\*(?![*\w])/g, "$1<em>$2</em>")
      .replace(/(^|[^\w])_([^_\s][^_\n]*?)_(?!\w)/g, "$1<em>$2</em>")
      .replace(TEXT_ICON_RE, function (_, symbol) { return iconHtml(TEXT_ICONS[symbol]); })
      .replace(/\n/g, "<br>");
    // A slot may hold earlier slots (a link's label), so fill them until none is left.
    for (var depth = 0; depth <= slots.length && text.indexOf("\u0000") !== -1; depth++) {
      text = text.replace(/\u0000(\d+)\u0000/g, function (_, i) { return slots[Number(i)]; });
    }
    return text;
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

  var pure = { escapeHtml: escapeHtml, renderMarkdown: renderMarkdown, settleMarkdown: settleMarkdown,
    withoutStatusLines: withoutStatusLines, contrast: contrast };
  if (typeof document === "undefined") {  // loaded by the tests under node
    module.exports = pure;
    return;
  }

  var STRINGS = {
    en: { title: "Chat", open: "Open chat", close: "Close chat", input: "Write a message",
      placeholder: "Write a message…", send: "Send", stop: "Stop the answer",
      newChat: "New conversation", connecting: "Connecting…", online: "Online",
      offline: "Offline: messages wait until you are back", reconnecting: "Reconnecting…",
      sending: "Sending…", sent: "Sent", queued: "Offline, queued: sends when you are back",
      failed: "Not sent", retry: "Retry", tooLong: "too long (at most {n} characters)",
      tooFast: "too fast, wait a moment", notAllowed: "not allowed on this site",
      noIdentity: "sign-in not accepted", serverError: "the server failed",
      refusedOrigin: "This chat is not enabled on this site.",
      refusedIdentity: "Your sign-in could not be verified, so the chat is off.",
      used: "used", working: "Working…", pressed: "Pressed", newMessage: "New message" },
    de: { title: "Chat", open: "Chat öffnen", close: "Chat schließen", input: "Nachricht schreiben",
      placeholder: "Nachricht schreiben…", send: "Senden", stop: "Antwort anhalten",
      newChat: "Neues Gespräch", connecting: "Verbinde…", online: "Online",
      offline: "Offline: Nachrichten warten, bis Sie wieder online sind",
      reconnecting: "Verbinde erneut…", sending: "Wird gesendet…", sent: "Gesendet",
      queued: "Offline, in der Warteschlange", failed: "Nicht gesendet", retry: "Erneut senden",
      tooLong: "zu lang (höchstens {n} Zeichen)", tooFast: "zu schnell, bitte kurz warten",
      notAllowed: "auf dieser Website nicht erlaubt", noIdentity: "Anmeldung nicht akzeptiert",
      serverError: "Serverfehler", refusedOrigin: "Dieser Chat ist auf dieser Website nicht freigeschaltet.",
      refusedIdentity: "Ihre Anmeldung konnte nicht geprüft werden; der Chat ist aus.",
      used: "genutzt", working: "Arbeite…", pressed: "Gedrückt", newMessage: "Neue Nachricht" },
    fr: { title: "Discussion", open: "Ouvrir la discussion", close: "Fermer la discussion",
      input: "Écrire un message", placeholder: "Écrire un message…", send: "Envoyer",
      stop: "Arrêter la réponse", newChat: "Nouvelle conversation", connecting: "Connexion…",
      online: "En ligne", offline: "Hors ligne : les messages attendent votre retour",
      reconnecting: "Reconnexion…", sending: "Envoi…", sent: "Envoyé",
      queued: "Hors ligne, en attente", failed: "Non envoyé", retry: "Réessayer",
      tooLong: "trop long ({n} caractères au plus)", tooFast: "trop rapide, patientez un peu",
      notAllowed: "non autorisé sur ce site", noIdentity: "connexion refusée",
      serverError: "erreur du serveur", refusedOrigin: "Cette discussion n'est pas activée sur ce site.",
      refusedIdentity: "Votre connexion n'a pas pu être vérifiée ; la discussion est coupée.",
      used: "utilisé", working: "En cours…", pressed: "Appuyé", newMessage: "Nouveau message" }
  };
  var VISITOR_KEY = "chat-gateway.visitor_id";
  var OPEN_KEY = "chat-gateway.open";
  var VISITOR_RE = /^[A-Za-z0-9_-]{8,64}$/;
  var SVG_NS = "http://www.w3.org/2000/svg";

  function stored(area, key, value) {  // storage can throw (blocked cookies, sandboxed frames)
    try {
      if (value === undefined) return window[area].getItem(key);
      if (value === null) window[area].removeItem(key); else window[area].setItem(key, value);
    } catch (e) { /* not kept */ }
    return null;
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

  function icon(name) {
    var svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("class", "cgw-icon");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    var path = document.createElementNS(SVG_NS, "path");
    path.setAttribute("d", ICONS[name]);
    svg.appendChild(path);
    return svg;
  }

  function iconButton(className, name, label) {
    var button = el("button", "cgw-iconbutton " + className);
    button.type = "button";
    button.setAttribute("aria-label", label);
    button.title = label;
    button.append(icon(name));
    return button;
  }

  function readOptions(tag) {
    var d = tag.dataset;
    var lang = (d.lang || document.documentElement.lang || navigator.language || "en").slice(0, 2).toLowerCase();
    var strings = STRINGS[lang] || STRINGS.en;
    var accent = /^#[0-9a-fA-F]{6}$/.test(d.color || "") ? d.color.toLowerCase() : "#1f5bd1";
    // Text on the accent colour: whichever of white and near-black reads better (WCAG AA wants 4.5).
    var onAccent = /^#[0-9a-fA-F]{6}$/.test(d.textColor || "") ? d.textColor
      : contrast(accent, "#ffffff") >= contrast(accent, "#111827") ? "#ffffff" : "#111827";
    var base = new URL(tag.src || location.href, location.href);
    var path = d.path || "/ws";
    return {
      t: strings, lang: STRINGS[lang] ? lang : "en",
      title: d.title || strings.title, greeting: d.greeting || "",
      accent: accent, onAccent: onAccent, position: d.position === "left" ? "left" : "right",
      avatar: /^(https?:|data:image\/)/.test(d.avatar || "") ? d.avatar : "",
      inline: d.mode === "inline" || !!d.target, target: d.target || "",
      images: d.images === "load", open: d.open === "true",
      userId: d.userId || "", userHash: d.userHash || "",
      socketUrl: d.url || (base.protocol === "https:" ? "wss://" : "ws://") + base.host + path,
      probeUrl: d.url ? d.url.replace(/^ws/, "http") : base.protocol + "//" + base.host + path,
      cssUrl: new URL("widget.css", base).href
    };
  }

  function startWidget(tag) {
    var o = readOptions(tag), t = o.t;
    var host = document.createElement("chat-gateway-widget");
    // Inline !important beats the page's own !important rules on the host element.
    host.style.cssText = "all: initial !important; display: block !important;" +
      (o.inline ? " height: 100% !important;" : "") + " visibility: hidden;";
    var shadow = host.attachShadow({ mode: "open" });
    var css = el("link");
    css.rel = "stylesheet";
    css.href = o.cssUrl;
    css.onload = css.onerror = function () { host.style.visibility = "visible"; };
    var root = el("div", "cgw-root cgw-" + o.position + (o.inline ? " cgw-inline" : " cgw-floating"));
    root.setAttribute("lang", o.lang);
    root.style.setProperty("--cgw-accent", o.accent);
    root.style.setProperty("--cgw-on-accent", o.onAccent);
    shadow.append(css, root);
    var ui = buildPanel(root, o);
    var target = o.target && document.querySelector(o.target);
    (target || document.body).append(host);
    var chat = createChat(ui, o);
    if (o.inline) {
      ui.panel.hidden = false;
      chat.connect();
    } else {
      var wasOpen = o.open || stored("sessionStorage", OPEN_KEY) === "1";
      ui.launcher.addEventListener("click", function () { setOpen(ui.panel.hidden, true); });
      ui.closeButton.addEventListener("click", function () { setOpen(false, true); });
      root.addEventListener("keydown", function (event) {
        if (event.key === "Escape" && !ui.panel.hidden) setOpen(false, true);
      });
      if (wasOpen) setOpen(true, false);
      else if (stored("localStorage", VISITOR_KEY)) chat.connect();  // a returning visitor
    }
    function setOpen(open, focus) {
      ui.panel.hidden = !open;
      root.classList.toggle("cgw-open", open);
      ui.launcher.setAttribute("aria-expanded", String(open));
      ui.launcher.setAttribute("aria-label", open ? t.close : t.open);
      stored("sessionStorage", OPEN_KEY, open ? "1" : null);
      if (open) {
        ui.launcher.classList.remove("cgw-unread");
        chat.connect();
        chat.scrollDown();
        if (focus) ui.input.focus();
      } else if (focus) ui.launcher.focus();
    }
    host.chatGateway = chat;  // for the site's own scripts (and tests): send, state
  }

  function buildPanel(root, o) {
    var t = o.t;
    var ui = {};
    ui.launcher = iconButton("cgw-launcher", "chat", t.open);
    ui.launcher.setAttribute("aria-expanded", "false");
    var panelId = "cgw-panel";
    ui.launcher.setAttribute("aria-controls", panelId);
    ui.panel = el("section", "cgw-panel");
    ui.panel.id = panelId;
    ui.panel.hidden = true;
    ui.panel.setAttribute("role", o.inline ? "region" : "dialog");
    ui.panel.setAttribute("aria-label", o.title);
    var head = el("header", "cgw-head");
    if (o.avatar) {
      var avatar = el("img", "cgw-avatar");
      avatar.src = o.avatar;  // the site's own choice, not a model's: safe to load
      avatar.alt = "";
      head.append(avatar);
    }
    var titles = el("div", "cgw-titles");
    titles.append(el("h2", "cgw-title", o.title));
    ui.state = el("span", "cgw-state", t.connecting);
    titles.append(ui.state);
    ui.stopButton = iconButton("cgw-stop", "stop", t.stop);
    ui.stopButton.hidden = true;
    ui.newButton = iconButton("cgw-new", "plus", t.newChat);
    ui.closeButton = iconButton("cgw-close", "close", t.close);
    head.append(titles, ui.stopButton, ui.newButton);
    if (!o.inline) head.append(ui.closeButton);
    ui.banner = el("div", "cgw-banner");
    ui.banner.setAttribute("role", "alert");
    ui.banner.hidden = true;
    ui.log = el("div", "cgw-log");
    ui.log.setAttribute("role", "log");
    ui.log.setAttribute("aria-live", "off");  // streamed edits would be read out word by word
    ui.log.tabIndex = 0;
    ui.live = el("div", "cgw-sr");
    ui.live.setAttribute("aria-live", "polite");  // finished answers only
    ui.form = el("form", "cgw-form");
    ui.input = el("textarea", "cgw-input");
    ui.input.rows = 1;
    ui.input.placeholder = t.placeholder;
    ui.input.setAttribute("aria-label", t.input);
    ui.send = iconButton("cgw-send", "send", t.send);
    ui.send.type = "submit";
    ui.form.append(ui.input, ui.send);
    ui.panel.append(head, ui.banner, ui.log, ui.live, ui.form);
    root.append(ui.panel);
    if (!o.inline) root.append(ui.launcher);
    return ui;
  }

  function createChat(ui, o) {
    var t = o.t;
    var ws = null, ready = false, started = false, refused = false, lastSeq = null, readySeq = 0;
    var backoff = 500, timer = null, maxChars = 0, quietUntil = 0;
    var users = {}, order = [], inflight = [], bots = {}, current = null, actions = [];

    // --- the transcript
    function nearBottom() { return ui.log.scrollHeight - ui.log.scrollTop - ui.log.clientHeight < 80; }
    function scrollDown() { ui.log.scrollTop = ui.log.scrollHeight; }
    function show(node) {
      var stick = nearBottom();
      ui.log.append(node);
      if (stick) scrollDown();
      return node;
    }
    function note(text, kind) { return show(el("div", "cgw-note" + (kind ? " cgw-" + kind : ""), text)); }
    function greet() {
      if (!o.greeting) return;
      var node = el("div", "cgw-msg cgw-bot cgw-greeting");
      node.append(el("div", "cgw-body", o.greeting));
      show(node);
    }

    function userBubble(id, text, action) {
      var node = el("div", "cgw-msg cgw-user" + (action ? " cgw-action" : ""));
      if (action) node.append(icon("check"), el("span", "cgw-sr", t.pressed + ": "));
      node.append(el("span", "cgw-text", text));
      var meta = el("div", "cgw-meta");
      var item = { id: id, node: node, meta: meta, state: "sent", frame: null };
      var wrap = el("div", "cgw-row cgw-row-user");
      wrap.append(node, meta);
      item.row = show(wrap);
      users[id] = item;
      return item;
    }

    function setState(item, state, reason) {
      item.state = state;
      item.row.setAttribute("data-state", state);
      item.meta.replaceChildren();
      if (state === "sent") {
        item.meta.append(icon("check"), el("span", "", t.sent));
      } else if (state === "failed") {
        item.meta.append(icon("alert"), el("span", "", t.failed + ": " + reason));
        var retry = el("button", "cgw-retry");
        retry.type = "button";
        retry.append(icon("retry"), document.createTextNode(t.retry));
        retry.addEventListener("click", function () { attempt(item); });
        item.meta.append(retry);
      } else {
        item.meta.append(icon("clock"), el("span", "", state === "queued" ? t.queued : t.sending));
      }
    }

    function attempt(item) {  // the first send and every retry: the same client_message_id
      if (refused) return setState(item, "failed", refused);
      if (maxChars && item.frame.text.length > maxChars) {
        return setState(item, "failed", t.tooLong.replace("{n}", maxChars));
      }
      if (Date.now() < quietUntil) return setState(item, "failed", t.tooFast);
      if (!(ws && ready)) {
        connect();
        return setState(item, "queued");
      }
      ws.send(JSON.stringify(item.frame));
      if (inflight.indexOf(item) === -1) inflight.push(item);
      setState(item, "sending");
    }

    function submit(text) {
      var id = randomId("c_");
      var item = userBubble(id, text);
      item.frame = { type: "message", text: text, client_message_id: id };
      order.push(item);
      attempt(item);
      scrollDown();
      return id;
    }

    function acknowledged(frame) {
      var item = users[frame.message_id];
      if (!item) {
        item = userBubble(frame.message_id, frame.text, frame.action);
        if (frame.action) markPressed(frame.action);
      }
      inflight = inflight.filter(function (x) { return x !== item; });
      setState(item, "sent");
    }

    function refuseInflight(code, message) {
      var reason = code === "text_too_long" ? t.tooLong.replace("{n}", maxChars || "?")
        : code === "rate_limited" ? t.tooFast : code === "internal_error" ? t.serverError : code;
      if (code === "rate_limited") {  // every frame after it is dropped for the quiet time
        var seconds = Number((/(\d+) s/.exec(message || "") || [])[1] || 5);
        quietUntil = Date.now() + seconds * 1000;
        inflight.splice(0).forEach(function (item) { setState(item, "failed", reason); });
      } else if (inflight.length) {
        setState(inflight.shift(), "failed", reason);
      }
    }

    function botMessage(id) {
      var bot = bots[id];
      if (bot) return bot;
      var node = el("div", "cgw-msg cgw-bot cgw-pending");
      var body = el("div", "cgw-body");
      var work = el("ul", "cgw-work");
      node.append(body, work);
      bot = bots[id] = { id: id, node: node, body: body, work: work, lines: {}, done: false };
      show(node);
      return bot;
    }

    function render(bot, text) {
      var stick = nearBottom();
      var source = bot.done ? text : settleMarkdown(withoutStatusLines(text)) || t.working;
      bot.body.innerHTML = renderMarkdown(source, { images: o.images });
      if (stick) scrollDown();
    }

    function statusLine(frame) {
      var bot = frame.message_id && bots[frame.message_id] || current;
      var key = frame.call_id || frame.task_id;
      var text = frame.call_id ? frame.label || frame.name
        : (frame.subagent_type || "specialist") + (frame.description ? ": " + frame.description : "");
      if (!bot) return note(text + " (" + frame.status + ")");
      var line = bot.lines[key];
      if (!line) {
        line = bot.lines[key] = el("li", "cgw-line");
        line.label = frame.call_id ? frame.label || frame.name : frame.subagent_type || "specialist";
        bot.work.append(line);
      }
      line.setAttribute("data-status", frame.status);
      line.replaceChildren(icon(frame.status === "running" ? (frame.call_id ? "tool" : "agent")
        : frame.status === "completed" ? "check" : "alert"),
        el("span", "", text + (frame.status === "running" ? "…" : "")));
    }

    function complete(bot, frame, replayed) {
      bot.done = true;
      bot.node.classList.remove("cgw-pending");
      render(bot, frame.text);
      var names = Object.keys(bot.lines).map(function (k) { return bot.lines[k].label; });
      if (names.length && !bot.used) {  // the work, folded away under the answer
        bot.used = el("details", "cgw-used");
        var summary = el("summary", "", t.used + ": " + names.filter(function (n, i) {
          return names.indexOf(n) === i;
        }).join(", "));
        bot.used.append(summary, bot.work);
        bot.node.append(bot.used);
      } else if (!names.length) bot.work.remove();
      hints(bot, frame.display);
      if (current === bot) current = null;
      ui.stopButton.hidden = !current;
      if (!replayed) {
        ui.live.textContent = bot.body.textContent;
        var root = ui.panel.parentNode;
        if (ui.panel.hidden) root.querySelector(".cgw-launcher").classList.add("cgw-unread");
      }
    }

    // --- display hints (cards, confirmations, alerts): built with textContent only, never HTML
    function hints(bot, display) {
      (Array.isArray(display) ? display : []).forEach(function (hint) {
        var node = hint && hint.type === "card" ? hintCard(hint)
          : hint && hint.type === "confirm" ? hintBox("cgw-confirm", null, hint.text)
          : hint && hint.type === "alert" ? hintBox("cgw-alert cgw-alert-" + (hint.level || "info"), hint.title, hint.text)
          : null;
        if (!node) return;
        addButtons(node, hint.buttons, bot.id);
        bot.node.append(node);
      });
      actions.forEach(markPressed);
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
      // Only images the server generated (data: URLs); a URL a model wrote could leak the chat.
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
        button.setAttribute("data-action", b.action_id);
        button.addEventListener("click", function () {
          var action = { action_id: b.action_id, label: b.label, value: b.value, message_id: messageId };
          markPressed(action);
          sendFrame({ type: "action", action_id: b.action_id, value: b.value, label: b.label, message_id: messageId });
        });
        row.append(button);
      });
      box.append(row);
    }
    function markPressed(action) {  // every tab shows which button was pressed, and none again
      if (actions.indexOf(action) === -1) actions.push(action);
      var bot = bots[action.message_id];
      if (!bot) return;
      bot.node.querySelectorAll("button[data-action]").forEach(function (button) {
        button.disabled = true;
        if (button.getAttribute("data-action") === action.action_id) {
          button.classList.add("cgw-pressed");
          button.setAttribute("aria-pressed", "true");
        }
      });
    }

    function clearAll() {
      ui.log.replaceChildren();
      bots = {};
      current = null;
      actions = [];
      ui.stopButton.hidden = true;
      Object.keys(users).forEach(function (id) {
        if (users[id].state === "sent" || !users[id].frame || users[id].frame.text.trim() === "/new") delete users[id];
      });
      order = order.filter(function (item) { return users[item.id] === item; });
      greet();
      order.forEach(function (item) { show(item.row); });
    }

    // --- the connection
    function sendFrame(frame) {
      if (ws && ready) ws.send(JSON.stringify(frame));
      else { actions.pending = (actions.pending || []).concat([frame]); connect(); }
    }

    function setBanner(text) {
      ui.banner.replaceChildren(icon("alert"), el("span", "", text));
      ui.banner.hidden = false;
    }

    function stop(reason, banner, consoleLine) {  // retrying cannot help: say so once, then rest
      refused = reason;
      clearTimeout(timer);
      ui.state.textContent = t.failed;
      setBanner(banner);
      console.error("chat-gateway: " + consoleLine);
      ui.input.disabled = ui.send.disabled = true;
      order.forEach(function (item) { if (item.state !== "sent") setState(item, "failed", reason); });
    }

    function handle(frame) {
      if (frame.type === "ready") {
        ready = true;
        backoff = 500;
        stored("localStorage", VISITOR_KEY, frame.visitor_id);
        if (typeof frame.max_text_chars === "number") maxChars = frame.max_text_chars;
        readySeq = frame.seq;
        if (lastSeq === null || frame.seq < lastSeq) lastSeq = Math.min(frame.seq, lastSeq || 0);
        ui.state.textContent = t.online;
        ui.panel.parentNode.classList.remove("cgw-offline");
        order.forEach(function (item) {
          if (item.state === "queued" || item.state === "sending") attempt(item);
        });
        (actions.pending || []).splice(0).forEach(sendFrame);
        return;
      }
      if (typeof frame.seq === "number") {
        if (lastSeq !== null && frame.seq <= lastSeq) return;  // seen before a reconnect
        lastSeq = frame.seq;
      }
      var replayed = typeof frame.seq === "number" && frame.seq <= readySeq;
      var bot;
      if (frame.type === "message.user") acknowledged(frame);
      else if (frame.type === "conversation.cleared") clearAll();
      else if (frame.type === "message.created" || frame.type === "message.updated") {
        bot = botMessage(frame.message_id);
        if (bot.done) return;
        current = bot;
        ui.stopButton.hidden = false;
        render(bot, frame.text);
      } else if (frame.type === "message.completed") {
        bot = botMessage(frame.message_id);
        if (!bot.done) complete(bot, frame, replayed);
      } else if (/^(tool|agent)\.(started|finished)$/.test(frame.type)) statusLine(frame);
      else if (frame.type === "error") {
        if (frame.code === "identity_invalid") {
          stop(t.noIdentity, t.refusedIdentity, "the server refused this page's signed identity (" +
            frame.message + "). Fix: compute data-user-hash on your server as " +
            "HMAC-SHA256(identity_secret, user_id) in lowercase hex; see the README, 'Signed identity'.");
        } else refuseInflight(frame.code, frame.message);
      }
    }

    function connect() {
      if (started || refused) return;
      started = true;
      open();
    }

    function open() {
      ready = false;
      var opened = false;
      ws = new WebSocket(o.socketUrl);
      ws.onopen = function () {
        opened = true;
        var hello = { type: "hello", resume_after: lastSeq === null ? 0 : lastSeq };
        var visitorId = stored("localStorage", VISITOR_KEY);
        if (visitorId && VISITOR_RE.test(visitorId)) hello.visitor_id = visitorId;
        if (o.userId) { hello.user_id = o.userId; hello.user_hash = o.userHash; }
        ws.send(JSON.stringify(hello));
      };
      ws.onmessage = function (event) {
        var frame;
        try { frame = JSON.parse(event.data); } catch (e) { return; }
        if (frame && typeof frame.type === "string") handle(frame);
      };
      ws.onclose = function (event) {
        ready = false;
        inflight.splice(0).forEach(function (item) { setState(item, "queued"); });
        if (refused || event.code === 4003) return;
        ui.panel.parentNode.classList.add("cgw-offline");
        ui.state.textContent = navigator.onLine === false ? t.offline : t.reconnecting;
        if (opened) return retry();
        // A browser hides why a socket failed; the same URL over HTTP says if it is the origin.
        fetch(o.probeUrl, { cache: "no-store", credentials: "omit" }).then(function (response) {
          if (response.status !== 403) return retry();
          stop(t.notAllowed, t.refusedOrigin, "the chat server refused this page's origin " +
            location.origin + ". Fix: add \"" + location.origin + "\" to " +
            "channels.websocket.allowed_origins in the gateway's config.yaml.");
        }, retry);
      };
    }

    function retry() {
      clearTimeout(timer);
      var delay = backoff + Math.random() * backoff / 2;
      backoff = Math.min(backoff * 2, 30000);
      timer = setTimeout(open, delay);
    }

    window.addEventListener("online", function () {  // back: now, not at the end of a backoff
      if (started && !ready && !refused) { backoff = 500; clearTimeout(timer); open(); }
    });
    window.addEventListener("offline", function () {
      if (!refused) ui.state.textContent = t.offline;
    });

    ui.form.addEventListener("submit", function (event) {
      event.preventDefault();
      var text = ui.input.value;
      if (!text.trim() || refused) return;
      ui.input.value = "";
      submit(text);
    });
    ui.input.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        ui.form.requestSubmit();
      }
    });
    ui.stopButton.addEventListener("click", function () { sendFrame({ type: "stop" }); });
    ui.newButton.addEventListener("click", function () { submit("/new"); });
    greet();

    return { connect: connect, scrollDown: scrollDown, send: submit,
      state: function () { return { ready: ready, refused: refused, lastSeq: lastSeq }; } };
  }

  // Last: everything above is defined by now.
  var script = document.currentScript || document.querySelector("script[src*='widget.js']");
  if (script && !script.hasAttribute("data-cgw-started")) {  // the same tag twice: one widget
    script.setAttribute("data-cgw-started", "");
    startWidget(script);
  }
})();
