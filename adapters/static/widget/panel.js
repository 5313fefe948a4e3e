/* The panel: options from the script tag's data- attributes, the Shadow DOM, launcher and panel. */

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
  var target = validSelector(d.target || "");
  return {
    t: strings, lang: STRINGS[lang] ? lang : "en",
    pageLang: d.lang || document.documentElement.lang || navigator.language || "",
    title: d.title || strings.title, greeting: d.greeting || "", botName: d.botName || "",
    intro: {},  // the server's: the persona's bot_name, welcome and suggestions (on ready)
    accent: accent, onAccent: onAccent, position: d.position === "left" ? "left" : "right",
    avatar: /^(https?:|data:image\/)/.test(d.avatar || "") ? d.avatar : "",
    inline: target !== null && (d.mode === "inline" || !!target), target: target || "",
    images: d.images === "load", open: d.open === "true",
    userId: d.userId || "", userHash: d.userHash || "",
    socketUrl: d.url || (base.protocol === "https:" ? "wss://" : "ws://") + base.host + path,
    probeUrl: d.url ? d.url.replace(/^ws/, "http") : base.protocol + "//" + base.host + path,
    cssUrl: new URL("widget.css", base).href
  };
}

// Site-owner input: a selector that is not CSS must not stop the widget; it floats instead.
function validSelector(selector) {
  if (!selector) return "";
  try {
    document.createDocumentFragment().querySelector(selector);
    return selector;
  } catch (error) {
    console.warn("chat widget: data-target " + JSON.stringify(selector) +
      " is not a CSS selector; showing the floating widget instead");
    return null;
  }
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
  // Stop, labelled, where the eyes are while an answer runs: above the composer
  ui.stopButton = el("button", "cgw-button cgw-stop");
  ui.stopButton.type = "button";
  ui.stopButton.setAttribute("aria-label", t.stop);
  ui.stopButton.title = t.stop;
  ui.stopButton.append(icon("stop"), el("span", "", t.stopLabel));
  ui.stopButton.hidden = true;
  // a pen, not a "+": a "+" reads as "add" or "attach", not "start a new conversation"
  ui.newButton = iconButton("cgw-new", "compose", t.newChat);
  ui.closeButton = iconButton("cgw-close", "close", t.close);
  head.append(titles, ui.newButton);
  if (!o.inline) head.append(ui.closeButton);
  ui.banner = el("div", "cgw-banner");
  ui.banner.setAttribute("role", "alert");
  ui.banner.hidden = true;
  // who answers while a person holds the conversation (a `handoff.updated` frame)
  ui.person = el("div", "cgw-person");
  ui.person.setAttribute("role", "status");
  ui.person.hidden = true;
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
  // files: shown once the server's ready offers uploads (files.js)
  ui.attach = iconButton("cgw-attach", "clip", t.attach);
  ui.mic = iconButton("cgw-mic", "mic", t.record);
  ui.mic.setAttribute("aria-pressed", "false");
  ui.attach.hidden = ui.mic.hidden = true;
  ui.picker = el("input", "cgw-picker");
  ui.picker.type = "file";
  ui.picker.multiple = true;
  ui.picker.hidden = true;
  ui.picker.tabIndex = -1;
  ui.chips = el("ul", "cgw-chips");
  ui.chips.setAttribute("aria-label", t.attached);
  ui.chips.hidden = true;
  ui.fileError = el("div", "cgw-file-error");
  ui.fileError.setAttribute("role", "alert");
  ui.fileError.hidden = true;
  ui.micState = el("span", "cgw-mic-state");
  ui.micState.setAttribute("role", "status");
  ui.micState.hidden = true;
  ui.form.append(ui.attach, ui.picker, ui.input, ui.mic, ui.send);
  ui.panel.append(head, ui.banner, ui.person, ui.log, ui.live, ui.stopButton, ui.chips, ui.micState,
    ui.fileError, ui.form);
  root.append(ui.panel);
  if (!o.inline) root.append(ui.launcher);
  return ui;
}

function boot() {  // runs as the script tag executes: currentScript is that tag
  var script = document.currentScript || document.querySelector("script[src*='widget.js']");
  if (script && !script.hasAttribute("data-cgw-started")) {  // the same tag twice: one widget
    script.setAttribute("data-cgw-started", "");
    // A tag without defer in <head> runs before <body> (and a data-target) exists.
    if (document.readyState === "loading") {
      document.addEventListener("DOMContentLoaded", function () { startWidget(script); });
    } else startWidget(script);
  }
}
