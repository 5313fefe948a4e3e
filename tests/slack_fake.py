"""A local Slack for the real slack_sdk/slack-bolt clients: Web API, Socket Mode, rate limits.

`POST /api/<method>` takes JSON or form bodies (slack_sdk sends `chat.*` as JSON, `auth.test`
as a form) and answers HTTP 200 `{"ok": …}`, as Slack does. Rate limits are Slack's, per
workspace: `chat.update` at `updates_per_minute` (Tier 3, ~50) and `chat.postMessage` at about
one a second per channel, each with a short burst (GCRA); past them HTTP 429 + `Retry-After` +
`{"ok": false, "error": "ratelimited"}`. Text is measured as Slack refuses it: more than
`MAX_TEXT_BYTES` UTF-8 bytes is `msg_too_long`. `apps.connections.open` (with the app token)
hands out a Socket Mode web socket on this server; `push()` sends an envelope down it and waits
for the app's ack. Every call is recorded (`calls`); every message is kept (`messages`).

Files: `add_file()` holds a file users shared (its `files[]` object for an event); its
`url_private` serves the bytes only with the bot token, and answers 200 with an HTML login page
without it, as Slack does. `files_upload_v2`'s three steps are served (`getUploadURLExternal`,
the POST of the bytes to the URL it gave, `completeUploadExternal`), and each file that lands
in a channel is recorded in `uploads`.

Faults Slack really produces can be scripted per method: an error code for the next calls
(`fail_next`), a 429 (`limit_next`), a call carried out whose answer is lost (`hang_next`: no
answer until the client gives up; `garble_next`: a proxy's HTML page), a message the user
deleted just before our update (`gone_next`), and a revoked token (`revoke()`). Blocks past some
of Block Kit's limits are refused with `invalid_blocks`, as Slack does.

Native streams (chat.startStream/appendStream/stopStream) follow tests/slack_fake_streams.py,
with Slack's tiers per workspace: appendStream Tier 4 (`appends_per_minute`, ~100), startStream
and stopStream Tier 2 (`stream_calls_per_minute`, ~20 each). `stop_streams()` is a user's stop.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests import slack_fake_streams as streams
from tests.slack_events import BOT_ID, BOT_USER, TEAM

BOT_TOKEN = "xoxb-1-test"
APP_TOKEN = "xapp-1-test"
MAX_TEXT_BYTES = 4000
BAD_GATEWAY = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
LOGIN_PAGE = "<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in</body></html>"


@dataclass(frozen=True)
class Upload:
    """A file the bot uploaded, as it landed: channel, thread, name, bytes, initial comment."""

    channel: str
    thread_ts: str | None
    name: str
    data: bytes
    comment: str | None


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    status: int = 200
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    thread_ts: str | None
    blocks: list[Any] | None = None
    updates: int = 0
    streaming: bool = False  # an open native stream
    started_at: float = 0.0
    chunks: list[dict[str, Any]] = field(default_factory=list)  # a stream's, in order
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> title, status
    plan: str | None = None
    streamed: bool = False  # began as a stream


class Gcra:
    """`per_second` calls a second, `burst` at once after a quiet spell."""

    def __init__(self, per_second: float, burst: int) -> None:
        self.per_second, self.burst = per_second, burst
        self._tat: dict[str, float] = {}

    def wait(self, key: str, now: float) -> float:
        """0 and counted if a call may go now; else how long until it may (not counted)."""
        tat = max(self._tat.get(key, now), now)
        early = tat - (self.burst - 1) / self.per_second - now
        if early > 0:
            return early
        self._tat[key] = tat + 1 / self.per_second
        return 0.0


class FakeSlack:
    def __init__(
        self,
        *,
        updates_per_minute: float = 50,
        update_burst: int = 5,
        posts_per_second: float = 1.0,
        post_burst: int = 10,
        appends_per_minute: float = 100,
        stream_calls_per_minute: float = 20,
        stream_burst: int = 3,
        stream_lifetime_s: float = 306.0,
    ) -> None:
        self.updates = Gcra(updates_per_minute / 60, update_burst)
        self.posts = Gcra(posts_per_second, post_burst)
        self.tiers = {
            "chat.appendStream": Gcra(appends_per_minute / 60, stream_burst * 2),
            "chat.startStream": Gcra(stream_calls_per_minute / 60, stream_burst),
            "chat.stopStream": Gcra(stream_calls_per_minute / 60, stream_burst),
        }
        self.stream_lifetime_s = stream_lifetime_s
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], Message] = {}
        self.acks: list[dict[str, Any]] = []
        self.fail_next: dict[str, list[str]] = {}  # method -> error codes for its next calls
        # method ("chat.*": any chat method) -> Retry-After for its next call
        self.limit_next: dict[str, int] = {}
        self.hang_next: dict[str, int] = {}
        self.garble_next: dict[str, int] = {}
        self.gone_next = 0
        self.revoked = False
        self.sockets_opened = 0  # Socket Mode connections the app has made
        self.shared: dict[str, tuple[str, str, bytes]] = {}  # id -> (name, type, bytes)
        self.downloads: list[str] = []  # file ids the bot downloaded (with its token)
        self.uploads: list[Upload] = []
        self._pending: dict[str, dict[str, Any]] = {}  # upload file id -> name, length, data
        self.url = ""
        self._ts = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []
        self._acked: dict[str, asyncio.Event] = {}
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()

    # ---------------------------------------------------------------- lifecycle and scripting

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_get("/files-pri/{team_file}/{name}", self._download)
        app.router.add_post("/upload/v1/{file_id}", self._upload)
        app.router.add_get("/link", self._socket)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/api/"
        return self.url

    async def close(self) -> None:
        self._closing.set()
        for socket in list(self._sockets):
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def add_file(self, data: bytes, name: str, mimetype: str) -> dict[str, Any]:
        """A file a user shares: held for download; its `files[]` object for the event."""
        file_id = f"F{len(self.shared) + 1:04d}"
        self.shared[file_id] = (name, mimetype, data)
        return self.file_object(file_id)

    def file_object(self, file_id: str) -> dict[str, Any]:
        name, mimetype, data = self.shared[file_id]
        url = f"{self.url.removesuffix('/api/')}/files-pri/{TEAM}-{file_id}/{name}"
        return {
            "id": file_id,
            "name": name,
            "mimetype": mimetype,
            "size": len(data),
            "url_private": url,
            "url_private_download": url,
        }

    def stop_streams(self, channel: str, thread_ts: str) -> list[str]:
        """A user pressed the agent session's stop: Slack ends the thread's open streams."""
        stopped = []
        for message in self.messages.values():
            if message.channel == channel and message.thread_ts == thread_ts and message.streaming:
                message.streaming = False
                stopped.append(message.ts)
        return stopped

    def revoke(self) -> None:
        """The app is uninstalled: every token is refused from now on."""
        self.revoked = True

    # ---------------------------------------------------------------- reading the records

    def ok(self, *methods: str) -> list[Call]:
        return [c for c in self.calls if c.method in methods and c.ok]

    def called(self, *methods: str) -> list[Call]:
        return [c for c in self.calls if c.method in methods]

    @property
    def ratelimited(self) -> list[Call]:
        return [c for c in self.calls if c.status == 429]

    def bot_messages(self, channel: str | None = None) -> list[Message]:
        """The bot's messages, oldest first (a deleted one is absent)."""
        return [m for m in self.messages.values() if channel is None or m.channel == channel]

    def thread(self, channel: str, thread_ts: str) -> list[str]:
        return [m.text for m in self.bot_messages(channel) if m.thread_ts == thread_ts]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()

    # ---------------------------------------------------------------- Socket Mode

    @property
    def connected(self) -> int:
        return len(self._sockets)

    async def refresh(self) -> None:
        """Slack's routine `disconnect` (refresh_requested): the app must open a new socket."""
        for socket in list(self._sockets):
            await socket.send_json({"type": "disconnect", "reason": "refresh_requested"})

    async def push(self, kind: str, payload: dict[str, Any], *, retry: int = 0) -> dict[str, Any]:
        """Send one envelope (`events_api`, `slash_commands`, `interactive`) down the socket and
        wait for the app's ack, which is returned."""
        await self.wait_for(lambda: bool(self._sockets))
        envelope_id = str(uuid.uuid4())
        acked = self._acked[envelope_id] = asyncio.Event()
        await self._sockets[-1].send_json(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "accepts_response_payload": kind != "events_api",
                "retry_attempt": retry,
                "retry_reason": "timeout" if retry else "",
                "payload": payload,
            }
        )
        async with asyncio.timeout(3):  # Slack's deadline for an ack
            await acked.wait()
        return next(a for a in self.acks if a.get("envelope_id") == envelope_id)

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self._sockets.append(socket)
        self.sockets_opened += 1
        self._notify()
        await socket.send_json(
            {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A1"}}
        )
        try:
            async for frame in socket:
                if frame.type is WSMsgType.TEXT:
                    ack = json.loads(frame.data)
                    self.acks.append(ack)
                    event = self._acked.get(ack.get("envelope_id", ""))
                    if event is not None:
                        event.set()
        finally:
            self._sockets.remove(socket)
            self._notify()
        return socket

    # ---------------------------------------------------------------- Web API

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """A shared file: its bytes with the bot token; Slack's login page (200) without."""
        file_id = request.match_info["team_file"].removeprefix(f"{TEAM}-")
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
            return web.Response(text=LOGIN_PAGE, content_type="text/html")
        if file_id not in self.shared:
            return web.Response(status=404)
        self.downloads.append(file_id)
        self._notify()
        return web.Response(body=self.shared[file_id][2], content_type="application/octet-stream")

    async def _upload(self, request: web.Request) -> web.Response:
        """Step 2 of an external upload: the bytes, POSTed to the URL step 1 gave."""
        pending = self._pending.get(request.match_info["file_id"])
        if pending is None:
            return web.Response(status=404)
        pending["data"] = await request.read()
        if len(pending["data"]) != int(pending["length"]):
            return web.Response(status=400, text="length mismatch")
        return web.Response(text=f"OK - {len(pending['data'])}")

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        if request.content_type == "application/json":
            params = dict(await request.json())
        else:
            params = dict(await request.post())
        params = dict(request.query) | params  # slack_sdk sends some methods' arguments so
        call = Call(method, params)
        self.calls.append(call)
        try:
            token = request.headers.get("Authorization", "").removeprefix("Bearer ")
            wanted = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
            if self.revoked or token != wanted:
                return self._answer(
                    call, {"error": "token_revoked" if self.revoked else "invalid_auth"}
                )
            if self.hang_next.get(method):
                self.hang_next[method] -= 1
                self._carry_out(call)  # it lands; its answer never comes
                await self._closing.wait()
                return web.Response(status=504)
            if self.garble_next.get(method):
                self.garble_next[method] -= 1
                self._carry_out(call)
                call.status = 502
                return web.Response(status=502, text=BAD_GATEWAY, content_type="text/html")
            scripted = self.fail_next.get(method)
            if scripted:
                return self._answer(call, {"error": scripted.pop(0)})
            forced = self.limit_next.pop(method, None)
            if forced is None and method.startswith("chat."):
                forced = self.limit_next.pop("chat.*", None)
            wait = float(forced) if forced is not None else self._rate_wait(method, params)
            if wait > 0:
                call.status, call.error = 429, "ratelimited"
                return web.json_response(
                    {"ok": False, "error": "ratelimited"},
                    status=429,
                    headers={"Retry-After": str(max(1, math.ceil(wait)))},
                )
            return self._answer(call, self._carry_out(call))
        finally:
            self._notify()

    def _answer(self, call: Call, body: dict[str, Any]) -> web.Response:
        call.error = body.get("error")
        return web.json_response({"ok": call.error is None, **body})

    def _rate_wait(self, method: str, params: dict[str, Any]) -> float:
        now = time.monotonic()
        if method == "chat.update":
            return self.updates.wait(TEAM, now)
        if method == "chat.postMessage":
            return self.posts.wait(f"{TEAM}:{params.get('channel')}", now)
        if method in self.tiers:
            return self.tiers[method].wait(TEAM, now)
        return 0.0

    def _carry_out(self, call: Call) -> dict[str, Any]:
        """Do what the method does; the body of its answer (with `error` if refused)."""
        p = call.params
        match call.method:
            case "auth.test":
                return {
                    "url": "https://example.slack.com/",
                    "team": "Example",
                    "user": "bot",
                    "team_id": TEAM,
                    "user_id": BOT_USER,
                    "bot_id": BOT_ID,
                }
            case "apps.connections.open":
                host = self.url.removeprefix("http://").removesuffix("/api/")
                return {"url": f"ws://{host}/link?ticket={uuid.uuid4()}"}
            case "chat.postMessage" | "chat.postEphemeral":
                if _invalid_blocks(p.get("blocks")):
                    return {"error": "invalid_blocks"}
                text = str(p.get("text") or "")
                if not text and not p.get("blocks"):
                    return {"error": "no_text"}
                if len(text.encode()) > MAX_TEXT_BYTES:
                    return {"error": "msg_too_long"}
                ts = f"1700000000.{next(self._ts):06d}"
                channel = str(p["channel"])
                if call.method == "chat.postEphemeral":
                    return {"message_ts": ts}
                blocks = p.get("blocks")
                blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
                self.messages[(channel, ts)] = Message(
                    channel, ts, text, p.get("thread_ts"), blocks
                )
                return {
                    "channel": channel,
                    "ts": ts,
                    "message": {
                        "type": "message",
                        "text": text,
                        "user": BOT_USER,
                        "bot_id": BOT_ID,
                        "ts": ts,
                    },
                }
            case "chat.update":
                key = (str(p.get("channel")), str(p.get("ts")))
                if self.gone_next:
                    self.gone_next -= 1
                    self.messages.pop(key, None)
                message = self.messages.get(key)
                if message is None:
                    return {"error": "message_not_found"}
                if message.streaming:
                    return {"error": "streaming_state_conflict"}
                if _invalid_blocks(p.get("blocks")):
                    return {"error": "invalid_blocks"}
                text = str(p.get("text") or "")
                if len(text.encode()) > MAX_TEXT_BYTES:
                    return {"error": "msg_too_long"}
                message.text, message.updates = text, message.updates + 1
                if p.get("blocks") is not None:
                    blocks = p["blocks"]
                    message.blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
                return {"channel": key[0], "ts": key[1], "text": text}
            case "agents.sessions.setStatus":
                statuses = ("processing", "active", "suspended", "closed")
                if not p.get("channel_id") or p.get("status") not in statuses:
                    return {"error": "invalid_arguments"}
                return {}
            case "chat.startStream" | "chat.appendStream" | "chat.stopStream":
                return self._stream(call.method, p)
            case "files.getUploadURLExternal":
                file_id = f"FU{len(self._pending) + 1:04d}"
                self._pending[file_id] = {"name": p.get("filename"), "length": p.get("length")}
                base = self.url.removesuffix("/api/")
                return {"upload_url": f"{base}/upload/v1/{file_id}", "file_id": file_id}
            case "files.completeUploadExternal":
                return self._complete_upload(p)
            case "files.info":
                file_id = str(p.get("file"))
                if file_id not in self.shared:
                    return {"error": "file_not_found"}
                return {"file": self.file_object(file_id)}
        return {}  # assistant.threads.*, and anything else: accepted

    def _stream(self, method: str, p: dict[str, Any]) -> dict[str, Any]:
        channel = str(p.get("channel", ""))
        if method == "chat.startStream":
            error = streams.start_error(p)
            if error:
                return {"error": error}
            ts = f"1700000000.{next(self._ts):06d}"
            message = Message(channel, ts, "", str(p["thread_ts"]), streaming=True, streamed=True)
            message.started_at = time.monotonic()
            streams.apply(message, p)
            self.messages[(channel, ts)] = message
            return {"channel": channel, "ts": ts}
        found = self.messages.get((channel, str(p.get("ts"))))
        error = streams.open_error(found, self.stream_lifetime_s) or streams.content_error(p)
        if method == "chat.stopStream":
            error = error or streams.stop_blocks_error(p) or _bad(p.get("blocks"))
        elif not error and not p.get("markdown_text") and not p.get("chunks"):
            error = "invalid_arguments"
        if error or found is None:
            return {"error": error or "message_not_found"}
        streams.apply(found, p)
        if method == "chat.stopStream":
            found.streaming = False
            if p.get("blocks"):
                blocks = p["blocks"]
                found.blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        return {"channel": channel, "ts": found.ts}

    def _complete_upload(self, p: dict[str, Any]) -> dict[str, Any]:
        listed = p.get("files")
        listed = json.loads(listed) if isinstance(listed, str) else listed or []
        done = []
        for item in listed:
            pending = self._pending.get(str(item.get("id")))
            if pending is None or "data" not in pending:
                return {"error": "file_not_found"}
            channel = p.get("channel_id")
            if channel:
                self.uploads.append(
                    Upload(
                        str(channel),
                        p.get("thread_ts"),
                        str(pending["name"]),
                        pending["data"],
                        p.get("initial_comment"),
                    )
                )
            done.append({"id": item["id"], "title": item.get("title"), "name": pending["name"]})
        return {"files": done}


def _bad(blocks: Any) -> str | None:
    return "invalid_blocks" if _invalid_blocks(blocks) else None


def _invalid_blocks(blocks: Any) -> bool:
    """Some of Block Kit's documented limits, which Slack refuses with `invalid_blocks`: a
    section's text 3,000 characters, each of its (at most 10) fields 2,000, a header 150, a
    button's text 75, and action ids unique within their block."""
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks or []
    for block in blocks:
        if block.get("type") == "section":
            fields = block.get("fields") or []
            if len(fields) > 10 or any(len(f["text"]) > 2000 for f in fields):
                return True
            if len((block.get("text") or {}).get("text", "")) > 3000:
                return True
        if block.get("type") == "header" and len(block["text"]["text"]) > 150:
            return True
        ids = [e.get("action_id") for e in block.get("elements", []) if "action_id" in e]
        if len(ids) != len(set(ids)):
            return True
        if any(len(e["text"]["text"]) > 75 for e in block.get("elements", []) if "action_id" in e):
            return True
    return False
