/* The bot's messages: the placeholder edited into the answer, a line per tool call and specialist
 * inside the bubble (folded into "used: …" when the answer is complete), and display hints. */

function createAnswers(ui, o, log, sendFrame) {
  var t = o.t;
  // Keyed by ids from the server and the model: Maps, so an id like "__proto__" is just a key.
  var bots = new Map(), current = null, actions = [];

  function message(id, at) {
    var bot = bots.get(id);
    if (bot) return bot;
    var node = el("div", "cgw-msg cgw-bot cgw-pending");
    var body = el("div", "cgw-body");
    var work = el("ul", "cgw-work");
    // three dots that bounce while the answer is written (still under reduced motion)
    var typing = el("span", "cgw-typing");
    typing.setAttribute("role", "img");
    typing.setAttribute("aria-label", t.typing);
    typing.append(el("i"), el("i"), el("i"));
    node.append(botHeader(o, at), body, typing, work);
    bot = { id: id, node: node, body: body, typing: typing, work: work, lines: new Map(), done: false };
    bots.set(id, bot);
    log.show(node);
    return bot;
  }

  function render(bot, text) {
    var stick = log.nearBottom();
    var source = bot.done ? text : settleMarkdown(withoutStatusLines(text)) || t.working;
    bot.body.innerHTML = renderMarkdown(source, { images: o.images });
    if (stick) log.scrollDown();
  }

  function statusLine(frame) {
    var bot = frame.message_id && bots.get(frame.message_id) || current;
    var key = frame.call_id || frame.task_id;
    // a specialist by its display name: its internal name is for logs
    var who = frame.display_name || frame.subagent_type || "specialist";
    var text = frame.call_id ? frame.label || frame.name
      : who + (frame.description ? ": " + frame.description : "");
    if (!bot) return log.note(text + " (" + frame.status + ")");
    var line = bot.lines.get(key);
    if (!line) {
      line = el("li", "cgw-line");
      bot.lines.set(key, line);
      line.label = frame.call_id ? frame.label || frame.name : who;
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
    bot.typing.remove();
    var text = String(frame.text || "");
    if (frame.stopped === true) {  // what it showed stays; its last paragraph is the mark
      var cut = text.lastIndexOf("\n\n");
      var mark = el("p", "cgw-stopped-mark");
      mark.append(icon("stop"), el("span", "", text.slice(cut + 2).replace(/^\u23F9\s*/, "")));
      text = cut < 0 ? "" : settleMarkdown(text.slice(0, cut));  // cut mid-markup: closed
      bot.node.classList.add("cgw-stopped");
    }
    render(bot, text);
    if (mark) bot.body.append(mark);  // in the answer it ends, read with it
    var names = Array.from(bot.lines.values(), function (line) { return line.label; });
    names = names.filter(function (name, i) { return names.indexOf(name) === i; });
    if (names.length && !bot.used) {  // the work, folded away under the answer
      bot.used = el("details", "cgw-used");
      bot.used.append(el("summary", "", t.used + ": " + names.join(", ")), bot.work);
      bot.node.append(bot.used);
    } else if (!names.length) bot.work.remove();
    hints(bot, frame.display);
    var files = attachmentList(frame.attachments, o.probeUrl);
    if (files) bot.node.append(files);
    if (current === bot) current = null;
    ui.stopButton.hidden = !current;
    if (!replayed) {
      announce(ui, bot.body.textContent);  // announced once, when complete
      if (ui.panel.hidden) ui.launcher.classList.add("cgw-unread");
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
    actions.forEach(pressed);
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
      rows.append(el("dt", "", field.label), withWholeDates(el("dd"), String(field.value)));
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
        pressed({ action_id: b.action_id, label: b.label, value: b.value, message_id: messageId });
        sendFrame({ type: "action", action_id: b.action_id, value: b.value, label: b.label,
          message_id: messageId, client_message_id: randomId("c_") });  // a resend: answered once
      });
      row.append(button);
    });
    box.append(row);
  }
  function pressed(action) {  // every tab shows which button was pressed, and none again
    if (actions.indexOf(action) === -1) actions.push(action);
    var bot = bots.get(action.message_id);
    if (!bot) return;
    bot.node.querySelectorAll("button[data-action]").forEach(function (button) {
      button.disabled = true;
      if (button.getAttribute("data-action") === action.action_id) {
        button.classList.add("cgw-pressed");
        button.setAttribute("aria-pressed", "true");
      }
    });
  }

  return {
    pressed: pressed,
    // message.created / .updated / .completed, tool.* and agent.*
    handle: function (frame, replayed) {
      if (/^(tool|agent)\./.test(frame.type)) return statusLine(frame);
      var bot = message(frame.message_id, frame.at);
      if (bot.done) return;
      if (frame.type === "message.completed") return complete(bot, frame, replayed);
      current = bot;
      ui.stopButton.hidden = false;
      render(bot, frame.text);
    },
    clear: function () {
      bots = new Map();
      current = null;
      actions = [];
      ui.stopButton.hidden = true;
    }
  };
}
