/* The user's messages: each shows its state (sending, sent, queued, failed and why, or dropped
 * by a stop before the bot answered it) and a retry that resends the same client_message_id, so
 * the server answers it once whatever happens. */

function createOutbox(ui, t, log, link, base) {
  var users = {}, order = [], inflight = [];
  var maxChars = 0, quietUntil = 0, refused = "";

  // A command ("/stop", "/help") is a line of the conversation, not a bubble said to the bot; a
  // stop goes above the answer it stops, which then ends "Stopped." below it, in reading order.
  function bubble(id, text, action, command, files) {
    var node = el("div", command ? "cgw-msg cgw-command" : "cgw-msg cgw-user" + (action ? " cgw-action" : ""));
    if (action) node.append(icon("check"), el("span", "cgw-sr", t.pressed + ": "));
    if (text) node.append(el("span", "cgw-text", text));
    var shown = files && attachmentList(files, base);
    if (shown) node.append(shown);
    var meta = el("div", "cgw-meta");
    var item = { id: id, node: node, meta: meta, state: "sent", frame: null };
    var row = el("div", "cgw-row cgw-row-user" + (command ? " cgw-row-command" : ""));
    row.append(node, meta);
    var stopped = command === "stop" && ui.log.querySelector(".cgw-bot.cgw-pending:not(.cgw-greeting)");
    item.row = stopped ? ui.log.insertBefore(row, stopped) : log.show(row);
    users[id] = item;
    return item;
  }

  function setState(item, state, reason) {
    item.state = state;
    item.row.setAttribute("data-state", state);
    item.meta.replaceChildren();
    if (state === "sent") {
      var time = timeOf(item.at);
      if (time) item.meta.append(time);
      item.meta.append(icon("check"), el("span", "", t.sent));
    } else if (state === "dropped") {  // taken, then dropped (a stop, a full queue): unanswered
      item.meta.append(icon("alert"), el("span", "", reason === "queue_full" ? t.droppedFull : t.dropped));
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
    if (!link.send(item.frame)) return setState(item, "queued");
    if (inflight.indexOf(item) === -1) inflight.push(item);
    setState(item, "sending");
  }

  return {
    submit: function (text, attachments) {  // attachments: the objects the uploads answered
      var id = randomId("c_");
      var item = bubble(id, text, null, commandOf(text));
      item.frame = { type: "message", text: text, client_message_id: id };
      if (attachments && attachments.length) {
        item.frame.attachments = attachments;
        var names = el("ul", "cgw-files");
        attachments.forEach(function (a) {
          var name = el("li", "cgw-file");
          name.append(icon(a.type === "audio" ? "mic" : "file"), el("span", "", String(a.name || a.type)));
          names.append(name);
        });
        item.node.append(names);
      }
      order.push(item);
      attempt(item);
      log.scrollDown();
      return id;
    },
    // message.user: the server took it (ours, or another tab's, or one from the replay)
    taken: function (frame) {
      if (frame.duplicate && !users[frame.message_id]) return;  // another page's resend
      var item = users[frame.message_id] || bubble(frame.message_id, frame.text, frame.action, frame.command, frame.attachments);
      inflight = inflight.filter(function (x) { return x !== item; });
      var files = item.frame && item.frame.attachments && attachmentList(frame.attachments, base);
      if (files) item.node.querySelector(".cgw-files").replaceWith(files);  // now as links
      item.at = frame.at || item.at;  // when the server took it
      setState(item, "sent");
    },
    // message.dropped: a stop (or a full queue) dropped it; `live`: not from the replay
    dropped: function (frame, live) {
      var item = users[frame.message_id];
      if (!item) return;  // its message.user was before this page's window
      inflight = inflight.filter(function (x) { return x !== item; });
      setState(item, "dropped", frame.reason);
      var said = frame.reason === "queue_full" ? t.droppedFull : t.dropped;
      if (live) announce(ui, said + ": " + item.node.textContent + ".");
    },
    // an error frame answers the oldest frame not yet answered (the server keeps their order)
    refusedByServer: function (code, message) {
      var reason = code === "text_too_long" ? t.tooLong.replace("{n}", maxChars || "?")
        : code === "rate_limited" ? t.tooFast : code === "internal_error" ? t.serverError : code;
      if (code === "rate_limited") {  // every frame after it is dropped for the quiet time
        var seconds = Number((/(\d+) s/.exec(message || "") || [])[1] || 5);
        quietUntil = Date.now() + seconds * 1000;
        inflight.splice(0).forEach(function (item) { setState(item, "failed", reason); });
      } else if (inflight.length) {
        setState(inflight.shift(), "failed", reason);
      }
    },
    ready: function (limit) {  // connected: send what waits, in the order it was written
      if (typeof limit === "number") maxChars = limit;
      order.forEach(function (item) {
        if (item.state === "queued" || item.state === "sending") attempt(item);
      });
    },
    disconnected: function () {
      inflight.splice(0).forEach(function (item) { setState(item, "queued"); });
    },
    refuse: function (reason) {  // the server will take nothing from this page
      refused = reason;
      order.forEach(function (item) {
        if (item.state !== "sent" && item.state !== "dropped") setState(item, "failed", reason);
      });
    },
    cleared: function () {  // /new: what was not sent yet stays, below the fresh start
      Object.keys(users).forEach(function (id) {
        var item = users[id];
        if (item.state === "sent" || item.state === "dropped" || !item.frame || item.frame.text.trim() === "/new") delete users[id];
      });
      order = order.filter(function (item) { return users[item.id] === item; });
      order.forEach(function (item) { log.show(item.row); });
    }
  };
}

function commandOf(text) {  // as the gateway reads one: "/stop" or "/stop@bot" -> "stop"
  var match = /^\s*\/([A-Za-z]\w*)(@\S*)?(\s|$)/.exec(text);
  return match ? match[1].toLowerCase() : "";
}
