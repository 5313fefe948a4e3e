/* The conversation: the socket (hello with resume_after, backoff, the refusals that end it) and
 * the server's frames handed to the outbox (the user's side) and the answers (the bot's). */

function createLog(ui, o, suggest) {
  var greeted = false;
  var log = {
    nearBottom: function () { return ui.log.scrollHeight - ui.log.scrollTop - ui.log.clientHeight < 80; },
    scrollDown: function () { ui.log.scrollTop = ui.log.scrollHeight; },
    show: function (node) {
      var stick = log.nearBottom();
      ui.log.append(node);
      if (stick) log.scrollDown();
      return node;
    },
    note: function (text) { return log.show(el("div", "cgw-note", text)); },
    // The first bubble, the widget's own (not part of the transcript): the site's greeting,
    // else the persona's welcome, else a plain one; and the persona's suggested questions,
    // which go once the conversation has a message.
    greet: function () {
      if (greeted) return;
      greeted = true;
      var node = el("div", "cgw-msg cgw-bot cgw-greeting");
      node.append(botHeader(o), el("div", "cgw-body", o.greeting || o.intro.welcome || o.t.welcome));
      var questions = Array.isArray(o.intro.suggestions) ? o.intro.suggestions : [];
      if (questions.length && !ui.log.querySelector(".cgw-row-user")) {
        var row = el("div", "cgw-suggestions");
        row.setAttribute("role", "group");
        row.setAttribute("aria-label", o.t.suggested);
        questions.forEach(function (text) {
          var button = el("button", "cgw-button cgw-suggestion", String(text));
          button.type = "button";
          button.addEventListener("click", function () { suggest(String(text)); });
          row.append(button);
        });
        node.append(row);
      }
      ui.log.prepend(node);
    },
    regreet: function () {  // the server's introduction came: the first bubble may change
      var old = ui.log.querySelector(".cgw-greeting");
      if (old) old.remove();
      greeted = false;
      log.greet();
    },
    cleared: function () { greeted = false; log.greet(); },
    talked: function () {  // a message: the suggestions have done their job
      var row = ui.log.querySelector(".cgw-suggestions");
      if (row) row.remove();
    }
  };
  return log;
}

function createChat(ui, o) {
  var t = o.t;
  var ws = null, ready = false, started = false, refused = false, lastSeq = null, readySeq = 0;
  var epoch = null;  // ready.epoch: the numbering lastSeq counts in (a restart starts another)
  var backoff = 500, timer = null, waiting = [];
  var log = createLog(ui, o, function (text) { log.talked(); outbox.submit(text); });
  var link = { send: function (frame) {  // false: not connected now (it is being connected)
    if (ws && ready) { ws.send(JSON.stringify(frame)); return true; }
    connect();
    return false;
  } };
  var outbox = createOutbox(ui, t, log, link, o.probeUrl);
  var composer = createComposer(ui, o, function () {  // a voice clip goes as soon as it is in
    composer.take().then(function (files) { if (files.length) outbox.submit("", files); });
  });
  var answers = createAnswers(ui, o, log, sendFrame);

  function sendFrame(frame) {  // stop and button presses: sent when connected
    if (!link.send(frame)) waiting.push(frame);
  }

  function stop(reason, banner, consoleLine) {  // retrying cannot help: say so once, then rest
    refused = true;
    clearTimeout(timer);
    ui.state.textContent = t.failed;
    ui.banner.replaceChildren(icon("alert"), el("span", "", banner));
    ui.banner.hidden = false;
    console.error("chat-gateway: " + consoleLine);
    ui.input.disabled = ui.send.disabled = ui.attach.disabled = ui.mic.disabled = true;
    outbox.refuse(reason);
  }

  function handle(frame) {
    if (frame.type === "ready") {
      ready = true;
      backoff = 500;
      stored("localStorage", VISITOR_KEY, frame.visitor_id);
      readySeq = frame.seq;
      var intro = { bot_name: frame.bot_name, welcome: frame.welcome, suggestions: frame.suggestions };
      if (JSON.stringify(intro) !== JSON.stringify(o.intro)) { o.intro = intro; log.regreet(); }
      // another epoch: the server sends what it kept as history; new seqs start after ready's
      if (epoch !== null && frame.epoch !== epoch) lastSeq = frame.seq;
      epoch = frame.epoch || null;
      if (lastSeq === null || frame.seq < lastSeq) lastSeq = Math.min(frame.seq, lastSeq || 0);
      ui.state.textContent = t.online;
      ui.panel.parentNode.classList.remove("cgw-offline");
      outbox.ready(frame.max_text_chars);
      composer.ready(frame.upload);
      waiting.splice(0).forEach(sendFrame);
      return;
    }
    if (typeof frame.seq === "number") {
      if (lastSeq !== null && frame.seq <= lastSeq) return;  // seen before a reconnect
      lastSeq = frame.seq;
    }
    if (frame.type === "message.user") {
      log.talked();
      outbox.taken(frame);
      if (frame.action) answers.pressed(frame.action);
    } else if (frame.type === "message.dropped") {
      outbox.dropped(frame, typeof frame.seq === "number" && frame.seq > readySeq);
    } else if (frame.type === "conversation.cleared") {
      ui.log.replaceChildren();
      answers.clear();
      log.cleared();
      outbox.cleared();
    } else if (/^(message\.(created|updated|completed)|(tool|agent)\.(started|finished))$/.test(frame.type)) {
      // replayed (the buffer, or the stored transcript after a restart): shown, not announced
      answers.handle(frame, frame.history === true || (typeof frame.seq === "number" && frame.seq <= readySeq));
    } else if (frame.type === "handoff.updated") {
      // a person asked for, or holding the conversation: their name, not the bot's typing
      ui.person.hidden = frame.mode === "bot";
      ui.person.textContent = frame.mode === "human"
        ? t.personReplying.replace("{name}", frame.operator || "")
        : t.personAsked;
    } else if (frame.type === "error" && frame.code === "identity_invalid") {
      stop(t.noIdentity, t.refusedIdentity, "the server refused this page's signed identity (" +
        frame.message + "). Fix: compute data-user-hash on your server as " +
        "HMAC-SHA256(identity_secret, user_id) in lowercase hex; see the README, 'Signed identity'.");
    } else if (frame.type === "error") outbox.refusedByServer(frame.code, frame.message);
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
      if (lastSeq && epoch) hello.epoch = epoch;
      var visitorId = stored("localStorage", VISITOR_KEY);
      if (visitorId && VISITOR_RE.test(visitorId)) hello.visitor_id = visitorId;
      if (o.userId) { hello.user_id = o.userId; hello.user_hash = o.userHash; }
      if (o.pageLang) hello.language = o.pageLang;  // the gateway's own texts follow the page
      ws.send(JSON.stringify(hello));
    };
    ws.onmessage = function (event) {
      var frame;
      try { frame = JSON.parse(event.data); } catch (e) { return; }
      if (frame && typeof frame.type === "string") handle(frame);
    };
    ws.onclose = function (event) {
      ready = false;
      outbox.disconnected();
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
    if ((!text.trim() && !composer.has()) || refused) return;
    ui.input.value = "";
    log.talked();
    if (!composer.has()) return outbox.submit(text);
    composer.take().then(function (files) {  // sent once its files are uploaded
      if (files.length || text.trim()) outbox.submit(text, files);
    });
  });
  ui.input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      ui.form.requestSubmit();
    }
  });
  ui.stopButton.addEventListener("click", function () { sendFrame({ type: "stop" }); });
  ui.newButton.addEventListener("click", function () { outbox.submit("/new"); });
  log.greet();

  return { connect: connect, scrollDown: log.scrollDown, send: outbox.submit,
    state: function () { return { ready: ready, refused: refused, lastSeq: lastSeq }; } };
}
