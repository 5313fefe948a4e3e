// The admin console's only script: live events over SSE (no inline script, CSP script-src 'self').
// A handoff page appends new messages to its transcript and shows state changes; the handoff
// list reloads when a handoff opens or changes, unless the operator is typing a search.
"use strict";
(function () {
  const page = document.querySelector("[data-live]");
  if (!page || !window.EventSource) return;
  const source = new EventSource(page.getAttribute("data-live"));
  const live = document.querySelector(".live");
  source.onopen = function () { if (live) live.hidden = false; };
  source.onerror = function () { if (live) live.hidden = true; };

  const transcript = document.getElementById("transcript");
  function append(role, who, text) {
    if (!transcript) return;
    const item = document.createElement("li");
    item.className = "msg role-" + role;
    const label = document.createElement("span");
    label.className = "who";
    label.textContent = who;
    const body = document.createElement("div");
    body.className = "text";
    body.textContent = text;  // text, never HTML
    item.append(label, body);
    transcript.append(item);
    transcript.scrollTop = transcript.scrollHeight;
  }
  if (transcript) transcript.scrollTop = transcript.scrollHeight;

  source.addEventListener("message", function (event) {
    const data = JSON.parse(event.data);
    append(data.role === "user" ? "user" : "operator", data.who || data.role, data.text || "");
  });
  source.addEventListener("state", function (event) {
    const data = JSON.parse(event.data);
    const status = document.getElementById("status");
    if (status) {
      status.textContent = data.status + (data.operator ? " · " + data.operator : "");
      status.className = "badge status-" + data.status;
    }
    const box = document.getElementById("reply-text");
    // to the page's own address: a reload of a form's answer would post the form again
    if (!transcript || !box || !box.value) window.location.replace(page.getAttribute("data-home"));
  });
  source.addEventListener("audit", function (event) {
    const data = JSON.parse(event.data);
    const audit = document.getElementById("audit");
    if (!audit) return;
    const item = document.createElement("li");
    item.textContent = data.who + " " + data.text;
    audit.append(item);
  });
})();
