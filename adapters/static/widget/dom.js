/* The widget's words (per language), storage, ids and the small DOM builders. */

var STRINGS = {
  en: { title: "Chat", open: "Open chat", close: "Close chat", input: "Write a message",
    placeholder: "Write a message…", send: "Send", stop: "Stop the answer", stopLabel: "Stop", typing: "Typing",
    newChat: "New conversation", connecting: "Connecting…", online: "Online",
    personReplying: "{name} (a person) is replying", personAsked: "Waiting for a person to join…",
    offline: "Offline: messages wait until you are back", reconnecting: "Reconnecting…",
    sending: "Sending…", sent: "Sent", queued: "Offline, queued: sends when you are back",
    failed: "Not sent", dropped: "Not sent: stopped", droppedFull: "Not sent: too many messages waiting, send it again once answered", retry: "Retry", tooLong: "too long (at most {n} characters)",
    tooFast: "too fast, wait a moment", notAllowed: "not allowed on this site",
    noIdentity: "sign-in not accepted", serverError: "the server failed",
    refusedOrigin: "This chat is not enabled on this site.",
    refusedIdentity: "Your sign-in could not be verified, so the chat is off.",
    used: "used", working: "Working…", pressed: "Pressed", newMessage: "New message",
    welcome: "Hello! How can I help you?", suggested: "Suggested questions",
    attach: "Attach a file", attached: "Files to send", file: "file",
    uploading: "Uploading…", removeFile: "Remove {name}", fileTooLarge: "“{name}” is too large (at most {max})",
    record: "Record a voice message", stopRecording: "Stop recording and send", recording: "Recording",
    micUnavailable: "This browser cannot record audio", micDenied: "The microphone is not allowed" },
  de: { title: "Chat", open: "Chat öffnen", close: "Chat schließen", input: "Nachricht schreiben",
    placeholder: "Nachricht schreiben…", send: "Senden", stop: "Antwort anhalten", stopLabel: "Anhalten", typing: "Schreibt",
    newChat: "Neues Gespräch", connecting: "Verbinde…", online: "Online",
    personReplying: "{name} (eine Person) antwortet", personAsked: "Warte, bis eine Person übernimmt…",
    offline: "Offline: Nachrichten warten, bis Sie wieder online sind",
    reconnecting: "Verbinde erneut…", sending: "Wird gesendet…", sent: "Gesendet",
    queued: "Offline, in der Warteschlange", failed: "Nicht gesendet",
    dropped: "Nicht gesendet: angehalten", droppedFull: "Nicht gesendet: zu viele Nachrichten warten, bitte nach der Antwort erneut senden", retry: "Erneut senden",
    tooLong: "zu lang (höchstens {n} Zeichen)", tooFast: "zu schnell, bitte kurz warten",
    notAllowed: "auf dieser Website nicht erlaubt", noIdentity: "Anmeldung nicht akzeptiert",
    serverError: "Serverfehler", refusedOrigin: "Dieser Chat ist auf dieser Website nicht freigeschaltet.",
    refusedIdentity: "Ihre Anmeldung konnte nicht geprüft werden; der Chat ist aus.",
    used: "genutzt", working: "Arbeite…", pressed: "Gedrückt", newMessage: "Neue Nachricht",
    welcome: "Hallo! Wie kann ich helfen?", suggested: "Vorgeschlagene Fragen",
    attach: "Datei anhängen", attached: "Zu sendende Dateien", file: "Datei",
    uploading: "Wird hochgeladen…", removeFile: "{name} entfernen", fileTooLarge: "„{name}“ ist zu groß (höchstens {max})",
    record: "Sprachnachricht aufnehmen", stopRecording: "Aufnahme beenden und senden", recording: "Aufnahme",
    micUnavailable: "Dieser Browser kann keinen Ton aufnehmen", micDenied: "Das Mikrofon ist nicht erlaubt" },
  fr: { title: "Discussion", open: "Ouvrir la discussion", close: "Fermer la discussion",
    input: "Écrire un message", placeholder: "Écrire un message…", send: "Envoyer",
    stop: "Arrêter la réponse", stopLabel: "Arrêter", typing: "En train d'écrire", newChat: "Nouvelle conversation", connecting: "Connexion…",
    online: "En ligne", offline: "Hors ligne : les messages attendent votre retour",
    personReplying: "{name} (une personne) vous répond", personAsked: "En attente d'une personne…",
    reconnecting: "Reconnexion…", sending: "Envoi…", sent: "Envoyé",
    queued: "Hors ligne, en attente", failed: "Non envoyé", dropped: "Non envoyé : arrêté", droppedFull: "Non envoyé : trop de messages en attente, renvoyez-le après la réponse",
    retry: "Réessayer",
    tooLong: "trop long ({n} caractères au plus)", tooFast: "trop rapide, patientez un peu",
    notAllowed: "non autorisé sur ce site", noIdentity: "connexion refusée",
    serverError: "erreur du serveur", refusedOrigin: "Cette discussion n'est pas activée sur ce site.",
    refusedIdentity: "Votre connexion n'a pas pu être vérifiée ; la discussion est coupée.",
    used: "utilisé", working: "En cours…", pressed: "Appuyé", newMessage: "Nouveau message",
    welcome: "Bonjour ! Comment puis-je vous aider ?", suggested: "Questions suggérées",
    attach: "Joindre un fichier", attached: "Fichiers à envoyer", file: "fichier",
    uploading: "Envoi du fichier…", removeFile: "Retirer {name}", fileTooLarge: "« {name} » est trop volumineux ({max} au plus)",
    record: "Enregistrer un message vocal", stopRecording: "Arrêter et envoyer", recording: "Enregistrement",
    micUnavailable: "Ce navigateur ne peut pas enregistrer de son", micDenied: "Le microphone n'est pas autorisé" }
};
var VISITOR_KEY = "chat-gateway.visitor_id";
var OPEN_KEY = "chat-gateway.open";
var VISITOR_RE = /^[A-Za-z0-9_-]{8,64}$/;
var SVG_NS = "http://www.w3.org/2000/svg";

// Read out by screen readers (the polite live region): what is said within a moment of the last
// announcement is added to it, not put over it (a stop's dropped messages, then its "Stopped").
function announce(ui, text) {
  var now = Date.now(), recent = now - (ui.liveAt || 0) < 2000;
  ui.live.textContent = recent && ui.live.textContent ? ui.live.textContent + " " + text : text;
  ui.liveAt = now;
}

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

// A message's time, in the visitor's own time zone; `at` is the server's ISO time (UTC), or
// absent (a message of the stored transcript): no time then, rather than a wrong one.
function timeOf(at) {
  var when = at ? new Date(at) : null;
  if (!when || isNaN(when.getTime())) return null;
  var node = el("time", "cgw-time", when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }));
  node.dateTime = when.toISOString();
  node.title = when.toLocaleString();
  return node;
}

// Who is speaking, above each of the bot's bubbles: its avatar (the site's data-avatar, else an
// icon), its name and the time.
function botHeader(o, at) {
  var head = el("div", "cgw-from");
  if (o.avatar) {
    var image = el("img", "cgw-from-avatar");
    image.src = o.avatar;  // the site's own choice, not a model's: safe to load
    image.alt = "";
    head.append(image);
  } else {
    var badge = el("span", "cgw-from-avatar");
    badge.append(icon("chat"));
    head.append(badge);
  }
  head.append(el("span", "cgw-from-name", o.botName || o.intro.bot_name || o.title));
  var time = timeOf(at);
  if (time) head.append(time);
  return head;
}

// `text` into `node` as text, each date ("2026-12-02") in a span that does not wrap at its "-"
function withWholeDates(node, text) {
  String(text).split(/(\b\d{4}-\d{2}-\d{2}\b)/).forEach(function (piece, i) {
    if (piece) node.append(i % 2 ? el("span", "cgw-nowrap", piece) : document.createTextNode(piece));
  });
  return node;
}
