/* Files: what the user attaches (the attach button, a paste, a drop on the panel, a voice clip
 * from the mic) uploaded at once through `ready.upload`, shown as chips until the message goes,
 * and the files a message carries shown as links. A file is never rendered as HTML: a link to
 * download it, or an image element for the raster types the server stored as such (never an
 * SVG). */

var IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
var CLIP_TYPES = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/webm", "audio/ogg"];

function sizeText(bytes) {
  return bytes >= 100000 ? (bytes / 1000000).toFixed(1) + " MB" : Math.max(1, Math.round(bytes / 1000)) + " KB";
}

// The files of a message frame (message.user, message.completed) under its text.
function attachmentList(items, base) {
  var list = el("ul", "cgw-files");
  (Array.isArray(items) ? items : []).forEach(function (a) {
    if (!a || typeof a.url !== "string") return;
    var url;
    try { url = new URL(a.url, base); } catch (e) { return; }
    if (url.protocol !== "http:" && url.protocol !== "https:") return;
    var name = String(a.name || a.type || "file");
    var link = el("a", "cgw-file");
    link.href = url.href;
    link.rel = "noopener noreferrer";
    link.target = "_blank";
    link.setAttribute("download", name);
    if (a.type === "image" && IMAGE_TYPES.indexOf(a.mime_type) !== -1) {
      var img = el("img", "cgw-file-image");
      img.src = url.href;
      img.alt = name;
      link.append(img);
    } else {
      link.append(icon(a.type === "audio" ? "mic" : "file"), el("span", "", name));
      if (typeof a.size === "number") link.append(el("span", "cgw-file-size", sizeText(a.size)));
    }
    var item = el("li");
    item.append(link);
    list.append(item);
  });
  return list.childNodes.length ? list : null;
}

function createComposer(ui, o, onClip) {
  var t = o.t, upload = null, pending = [], recorder = null, clipTimer = null;

  function error(text) {  // a refusal the user must see: under the input, read out at once
    ui.fileError.textContent = text || "";
    ui.fileError.hidden = !text;
  }

  function add(file) {
    if (!upload) return;
    if (file.size > upload.max_bytes) {
      error(t.fileTooLarge.replace("{name}", file.name || t.file).replace("{max}", sizeText(upload.max_bytes)));
      return;
    }
    error("");
    var item = { file: file, attachment: null, failed: "", chip: el("li", "cgw-chip") };
    if (IMAGE_TYPES.indexOf(file.type) !== -1) {  // a preview from the user's own bytes
      var preview = el("img", "cgw-chip-image");
      preview.alt = "";
      preview.src = item.preview = URL.createObjectURL(file);
      item.chip.append(preview);
    } else item.chip.append(icon(file.type.indexOf("audio/") === 0 ? "mic" : "file"));
    item.chip.append(el("span", "cgw-chip-name", file.name || t.file));
    item.state = el("span", "cgw-chip-state", t.uploading);
    var remove = iconButton("cgw-chip-remove", "close", t.removeFile.replace("{name}", file.name || t.file));
    remove.addEventListener("click", function () { drop(item); ui.input.focus(); });
    item.chip.append(item.state, remove);
    ui.chips.append(item.chip);
    ui.chips.hidden = false;
    pending.push(item);
    item.done = send(item);
    return item;
  }

  function send(item) {
    var form = new FormData();
    form.append("file", item.file, item.file.name || "file");
    return fetch(new URL(upload.url, o.probeUrl).href, {
      method: "POST", body: form, credentials: "omit",
      headers: { Authorization: "Bearer " + upload.token }
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (body) {
        if (response.status === 201 && body.attachment) {
          item.attachment = body.attachment;
          item.state.textContent = sizeText(item.file.size);
          return;
        }
        var why = response.status === 413 ? t.fileTooLarge.replace("{name}", item.file.name || t.file)
          .replace("{max}", sizeText(upload.max_bytes)) : response.status === 429 ? t.tooFast : (body.error || t.serverError);
        fail(item, why);
      });
    }, function () { fail(item, t.serverError); });
  }

  function fail(item, why) {
    item.failed = why;
    item.chip.classList.add("cgw-chip-failed");
    item.state.textContent = t.failed;
    error(why);
  }

  function drop(item) {
    pending = pending.filter(function (x) { return x !== item; });
    item.chip.remove();
    if (item.preview) URL.revokeObjectURL(item.preview);
    ui.chips.hidden = pending.length === 0;
    if (!pending.some(function (x) { return x.failed; })) error("");
  }

  function addAll(files) { Array.prototype.forEach.call(files || [], add); }

  function startClip() {
    if (!navigator.mediaDevices || typeof MediaRecorder === "undefined") return error(t.micUnavailable);
    navigator.mediaDevices.getUserMedia({ audio: true }).then(function (stream) {
      var type = CLIP_TYPES.filter(function (x) { return MediaRecorder.isTypeSupported(x); })[0];
      var chunks = [], started = Date.now();
      recorder = new MediaRecorder(stream, type ? { mimeType: type } : undefined);
      recorder.ondataavailable = function (event) { if (event.data.size) chunks.push(event.data); };
      recorder.onstop = function () {
        stream.getTracks().forEach(function (track) { track.stop(); });
        var mime = (recorder.mimeType || type || "audio/webm").split(";")[0];
        recorder = null;
        recording(false);
        var ext = { "audio/ogg": "ogg", "audio/mp4": "m4a", "audio/mpeg": "mp3" }[mime] || "webm";
        var clip = new File(chunks, "voice-note." + ext, { type: mime });
        var item = clip.size ? add(clip) : null;
        if (item) item.done.then(function () { if (item.attachment) onClip(); });
      };
      recorder.start();
      recording(true, started);
    }, function () { error(t.micDenied); });
  }

  function recording(on, started) {
    ui.mic.classList.toggle("cgw-recording", on);
    ui.mic.setAttribute("aria-pressed", String(on));
    var label = on ? t.stopRecording : t.record;
    ui.mic.setAttribute("aria-label", label);
    ui.mic.title = label;
    ui.micState.hidden = !on;
    clearInterval(clipTimer);
    if (!on) return;
    var tick = function () {
      var s = Math.floor((Date.now() - started) / 1000);
      ui.micState.textContent = t.recording + " " + Math.floor(s / 60) + ":" + ("0" + s % 60).slice(-2);
    };
    tick();
    clipTimer = setInterval(tick, 500);
  }

  ui.attach.addEventListener("click", function () { ui.picker.click(); });
  ui.picker.addEventListener("change", function () { addAll(ui.picker.files); ui.picker.value = ""; });
  ui.input.addEventListener("paste", function (event) {
    var files = event.clipboardData && event.clipboardData.files;
    if (!upload || !files || !files.length) return;  // plain text pastes as ever
    event.preventDefault();
    addAll(files);
  });
  ui.panel.addEventListener("dragover", function (event) {
    if (!upload || !event.dataTransfer || Array.prototype.indexOf.call(event.dataTransfer.types, "Files") === -1) return;
    event.preventDefault();
    ui.panel.classList.add("cgw-dropping");
  });
  ui.panel.addEventListener("dragleave", function (event) {
    if (!ui.panel.contains(event.relatedTarget)) ui.panel.classList.remove("cgw-dropping");
  });
  ui.panel.addEventListener("drop", function (event) {
    ui.panel.classList.remove("cgw-dropping");
    if (!upload || !event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    addAll(event.dataTransfer.files);
  });
  ui.mic.addEventListener("click", function () {
    if (recorder) recorder.stop(); else startClip();
  });

  return {
    ready: function (offer) {  // ready.upload, absent when the server keeps no files
      upload = offer && typeof offer.url === "string" ? offer : null;
      ui.attach.hidden = !upload;
      ui.mic.hidden = !upload || !navigator.mediaDevices || typeof MediaRecorder === "undefined";
    },
    has: function () { return pending.length > 0; },
    // the uploaded files' attachments, once every pending upload is done (failed ones stay)
    take: function () {
      return Promise.all(pending.map(function (x) { return x.done; })).then(function () {
        var sent = pending.filter(function (x) { return x.attachment; });
        sent.forEach(drop);
        return sent.map(function (x) { return x.attachment; });
      });
    }
  };
}
