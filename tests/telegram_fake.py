"""A local Telegram Bot API for the real aiogram client: records every call, enforces flood limits.

It speaks what aiogram sends (form-encoded fields, JSON-dumped non-strings; JSON bodies work too)
and answers in Telegram's shapes. Per chat, sendMessage, editMessageText and sendChatAction must
be `interval_s` apart, else 429 + retry_after and a ban for that long, as Telegram does. HTML is
checked the way Telegram checks it (known tags, balanced) and the 4096 limit is counted in UTF-16
units of the text after entity parsing.

Faults Telegram really produces can be scripted: a 429 (`force_429`), a message the user deleted
before our edit (`gone_next`), an edit that finds the text already there, as after the same edit
from another process (`not_modified_next`), and a call carried out whose answer is lost: a proxy's
HTML error page (`garble_answer_next`) or no answer at all (`hang_answer_next`); a method refused
every time (`refuse`), and a getUpdates that answers an empty poll at once (`poll_answers_at_once`).

Live drafts (`sendMessageDraft`, Bot API 9.5) exist only in a fake made with `drafts=True`; by
default it is a server from before them, answering 404 as such a server does (the channel then
falls back to edits: the tests of edits in private chats run so). They follow Telegram's rules: private chats only (a group draws 400
TEXTDRAFT_PEER_INVALID), a non-zero integer `draft_id`, 0-4096 characters (empty shows
"Thinking…"), the chat's rate like a message. `drafts` holds what each draft shows; the app drops
a chat's drafts when a message from the bot arrives there, and so does the fake. `stop_press`
builds the `stopped_message_generation` update a press of a draft's stop button sends.

Guest mode (Bot API 10.0): `guest` builds a summon (a `guest_message` update); its query takes
one `answerGuestQuery` (an article with text), within `guest_window_s` when that is set, and
`guest_answers` holds what each answer showed.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, Self

from aiohttp import web
from PIL import Image

# A bot id of this test process's own: who polls a bot is held in Redis by the bot's id, across
# `redis.prefix`es (bot/redis/accounts.py), so two test runs sharing one Redis must not share it.
BOT_ID = 100_000 + os.getpid() % 800_000
TOKEN = f"{BOT_ID}:TEST"
BOT: dict[str, Any] = {"id": BOT_ID, "is_bot": True, "first_name": "Bot", "username": "test_bot"}
UPLOADS = {
    "sendphoto": "photo",
    "senddocument": "document",
    "sendvoice": "voice",
    "sendaudio": "audio",
}
RATED = frozenset(
    {"sendmessage", "editmessagetext", "sendchataction", "sendmessagedraft", *UPLOADS}
)
BAD_GATEWAY = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
JSON_FIELDS = frozenset(
    {
        "reply_parameters",
        "link_preview_options",
        "allowed_updates",
        "commands",
        "entities",
        "reply_markup",
        "can_stop",
        "keep_on_stop",
        "result",
    }
)
INT_FIELDS = frozenset(
    {"chat_id", "message_id", "message_thread_id", "offset", "timeout", "limit", "draft_id"}
)
TAGS = frozenset(
    {
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-spoiler",
        "span",
        "tg-emoji",
    }
)


@dataclass(frozen=True)
class Upload:
    """A file the bot sent: by which method, to which chat, under what name, with what bytes."""

    method: str
    chat_id: int
    name: str
    data: bytes
    caption: str | None
    message_id: int


@dataclass
class Call:
    method: str  # lower case: sendmessage, editmessagetext ...
    params: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    status: int = 200
    error: str | None = None
    text: str | None = None  # the visible text a send or edit left in the chat
    message_id: int | None = None  # the message a successful sendMessage created

    @property
    def chat_id(self) -> int | None:
        return self.params.get("chat_id")


class ApiError(Exception):
    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status, self.description, self.retry_after = status, description, retry_after


class FakeBotAPI:
    def __init__(
        self,
        *,
        interval_s: float = 1.0,
        token: str = TOKEN,
        bot: dict[str, Any] | None = None,
        drafts: bool = False,
    ) -> None:
        self.interval_s = interval_s
        self.drafts_supported = drafts
        self.token = token
        self.bot = bot or BOT  # what getMe answers: another token is another bot
        self.calls: list[Call] = []
        self.messages: dict[tuple[int, int], str] = {}  # (chat, message id) -> visible text
        self.markups: dict[tuple[int, int], Any] = {}  # (chat, message id) -> reply_markup
        # (chat, thread or 0, draft id) -> what the draft shows, while the app shows it
        self.drafts: dict[tuple[int, int, int], str] = {}
        self.guest_answers: dict[str, str] = {}  # guest query id -> the answer's visible text
        self.guest_window_s: float | None = None  # a summon's answer comes within this, or never
        self._guest_queries: dict[str, float] = {}  # open query id -> when it was made
        self.webhook: dict[str, Any] = {}
        self.fail_parse_next = 0  # the next N HTML texts get "can't parse entities"
        # method (lower case) -> how many of its next calls a proxy answers with an HTML 502
        self.html_error_next: dict[str, int] = {}
        # method -> how many of its next calls are carried out (a message lands) but their answer
        # is lost: a proxy's HTML 502 page, or no answer until the fake closes (a client timeout)
        self.garble_answer_next: dict[str, int] = {}
        self.hang_answer_next: dict[str, int] = {}
        self.gone_next = 0  # the next N edits find their message deleted by the user just before
        self.not_modified_next = 0  # the next N edits find their message showing the new text
        self.poll_answers_at_once = False  # getUpdates does not hold an empty poll open
        # method -> (status, description) every call to it draws, as a proxy or an old server would
        self.refuse: dict[str, tuple[int, str]] = {}
        self.files: dict[str, tuple[str, bytes]] = {}  # file_id -> (file_path, bytes)
        self.uploads: list[Upload] = []
        self.downloads: list[str] = []  # file paths fetched from /file/bot<token>/
        self.files_gone = False  # downloads answer 404 (the file expired from Telegram's cache)
        # set: each download waits for it (a download in progress, as long as a test needs)
        self.downloads_held: asyncio.Event | None = None
        self._forced: dict[int, int] = {}  # chat -> retry_after for its next rated call
        self._last: dict[int, float] = {}
        self._banned_until: dict[int, float] = {}
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1000)
        self._message_ids = itertools.count(500)
        self._changed = asyncio.Event()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self.url = ""

    # ---------------------------------------------------------------- lifecycle and scripting

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self.url

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closing = True
        self._notify()
        if self._runner is not None:
            await self._runner.cleanup()

    def push(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue an update for getUpdates (and return it, to post to a webhook instead)."""
        self._updates.append(update)
        self._notify()
        return update

    def message(
        self,
        chat_id: int,
        text: str | None = "hello",
        *,
        user_id: int | None = None,
        entities: list[dict[str, Any]] | None = None,
        thread_id: int | None = None,
        reply_to: dict[str, Any] | None = None,
        language_code: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """An Update carrying one user message (not queued: pass it to `push`); `language_code`:
        the sender's app language, as Telegram tells it."""
        user = user_id if user_id is not None else (chat_id if chat_id > 0 else 42)
        chat = (
            {"id": chat_id, "type": "private", "first_name": "U"}
            if chat_id > 0
            else {
                "id": chat_id,
                "type": "supergroup",
                "title": "Group",
                **({"is_forum": True} if thread_id else {}),
            }
        )
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": user, "is_bot": False, "first_name": "Alice", "username": f"u{user}"},
        }
        if language_code is not None:
            message["from"]["language_code"] = language_code
        if text is not None:
            message["text"] = text
        if entities:
            message["entities"] = entities
        if thread_id:
            message |= {"message_thread_id": thread_id, "is_topic_message": True}
        if reply_to:
            message["reply_to_message"] = reply_to
        return {"update_id": next(self._update_ids), "message": message | extra}

    def press(
        self, chat_id: int, message_id: int, data: str, *, user_id: int | None = None
    ) -> dict[str, Any]:
        """An Update carrying a press of an inline keyboard button of message `message_id`
        (not queued: pass it to `push`)."""
        user = user_id if user_id is not None else (chat_id if chat_id > 0 else 42)
        chat = (
            {"id": chat_id, "type": "private", "first_name": "U"}
            if chat_id > 0
            else {"id": chat_id, "type": "supergroup", "title": "Group"}
        )
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat,
            "from": self.bot,
            "text": self.messages.get((chat_id, message_id), ""),
        }
        if self.markups.get((chat_id, message_id)):
            message["reply_markup"] = self.markups[(chat_id, message_id)]
        query = {
            "id": str(next(self._update_ids)),
            "from": {"id": user, "is_bot": False, "first_name": "Alice", "username": f"u{user}"},
            "chat_instance": "1",
            "message": message,
            "data": data,
        }
        return {"update_id": next(self._update_ids), "callback_query": query}

    def stop_press(
        self, chat_id: int, draft_id: int, *, thread_id: int | None = None
    ) -> dict[str, Any]:
        """The update a press of a draft's stop button sends (not queued: pass it to `push`)."""
        stopped: dict[str, Any] = {
            "chat": {"id": chat_id, "type": "private", "first_name": "U"},
            "draft_id": draft_id,
        }
        if thread_id:
            stopped["message_thread_id"] = thread_id
        return {"update_id": next(self._update_ids), "stopped_message_generation": stopped}

    def guest(self, chat_id: int, text: str, *, user_id: int | None = None) -> dict[str, Any]:
        """An Update summoning the bot as a guest in a chat it is not in (not queued)."""
        update = self.message(chat_id, text, user_id=user_id)
        query = f"gq{update['update_id']}"
        self._guest_queries[query] = time.monotonic()
        message = update.pop("message") | {"guest_query_id": query}
        return update | {"guest_message": message}

    def add_file(self, data: bytes, path: str = "documents/file_0.bin") -> str:
        """A file users sent, held for getFile and the download; its file_id."""
        file_id = f"F{len(self.files)}-{path.rsplit('/', 1)[-1]}"
        self.files[file_id] = (path, data)
        return file_id

    def force_429(self, chat_id: int, retry_after: int) -> None:
        """The next rated call to the chat draws a 429 and bans the chat for `retry_after`."""
        self._forced[chat_id] = retry_after

    # ---------------------------------------------------------------- reading the records

    def to_chat(self, chat_id: int, *methods: str) -> list[Call]:
        wanted = {m.lower() for m in methods} or RATED
        return [c for c in self.calls if c.chat_id == chat_id and c.method in wanted]

    def ok(self, chat_id: int, *methods: str) -> list[Call]:
        return [c for c in self.to_chat(chat_id, *methods) if c.status == 200]

    @property
    def rate_limited(self) -> list[Call]:
        return [c for c in self.calls if c.status == 429]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    # ---------------------------------------------------------------- the Bot API

    def _notify(self) -> None:
        self._changed.set()

    async def _handle(self, request: web.Request) -> web.Response:
        call = Call(request.match_info["method"].lower(), {})
        if request.content_type == "application/json":
            raw = await request.json()
        else:
            raw = dict(await request.post())
        call.params = {k: _decode(k, v) for k, v in raw.items()}
        self.calls.append(call)
        self._notify()
        if self.html_error_next.get(call.method, 0) > 0:
            self.html_error_next[call.method] -= 1
            call.status, call.error = 502, "Bad Gateway (an HTML page)"
            return web.Response(status=502, text=BAD_GATEWAY, content_type="text/html")
        try:
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            if call.method in self.refuse:
                raise ApiError(*self.refuse[call.method])
            result = await self._method(call)
        except ApiError as exc:
            call.status, call.error = exc.status, exc.description
            body: dict[str, Any] = {
                "ok": False,
                "error_code": exc.status,
                "description": exc.description,
            }
            if exc.retry_after is not None:
                body["parameters"] = {"retry_after": exc.retry_after}
            self._notify()
            return web.json_response(body, status=exc.status)
        self._notify()
        if _draw(self.garble_answer_next, call.method):
            call.error = "carried out; answered with an HTML 502 page"
            return web.Response(status=502, text=BAD_GATEWAY, content_type="text/html")
        if _draw(self.hang_answer_next, call.method):
            call.error = "carried out; never answered"
            while not self._closing:
                self._changed.clear()
                await self._changed.wait()
        return web.json_response({"ok": True, "result": result})

    async def _method(self, call: Call) -> Any:
        p = call.params
        if call.method == "sendmessagedraft":  # refused before flood control counts it
            self._check_draft(p)
        if call.method in RATED:
            self._check_rate(call)
        match call.method:
            case "getme":
                return self.bot
            case "getupdates":
                return await self._get_updates(p.get("offset"), p.get("timeout", 0))
            case "setwebhook":
                self.webhook = dict(p)
                return True
            case "deletewebhook" | "setmycommands" | "sendchataction" | "answercallbackquery":
                return True
            case "getfile":
                if p.get("file_id") not in self.files:
                    raise ApiError(400, "Bad Request: invalid file_id")
                path, data = self.files[p["file_id"]]
                if len(data) > 20 * 1024 * 1024:
                    raise ApiError(400, "Bad Request: file is too big")
                return {
                    "file_id": p["file_id"],
                    "file_unique_id": p["file_id"],
                    "file_size": len(data),
                    "file_path": path,
                }
            case "sendphoto" | "senddocument" | "sendvoice" | "sendaudio":
                return self._upload(call)
            case "sendmessagedraft":
                return self._draft(call)
            case "answerguestquery":
                return self._guest_answer(call)
            case "sendmessage":
                call.text = self._visible(p)
                self._drop_drafts(p["chat_id"])
                message_id = call.message_id = next(self._message_ids)
                self.messages[(p["chat_id"], message_id)] = call.text
                self.markups[(p["chat_id"], message_id)] = _decode(
                    "reply_markup", p.get("reply_markup")
                )
                return self._result(p, message_id, call.text)
            case "editmessagetext":
                key = (p["chat_id"], p["message_id"])
                if self.gone_next and key in self.messages:
                    self.gone_next -= 1
                    del self.messages[key]
                if key not in self.messages:
                    raise ApiError(400, "Bad Request: message to edit not found")
                text = self._visible(p)
                if self.not_modified_next:
                    self.not_modified_next -= 1
                    self.messages[key] = text
                markup = _decode("reply_markup", p.get("reply_markup"))
                if self.messages[key] == text and self.markups.get(key) == markup:
                    raise ApiError(
                        400,
                        "Bad Request: message is not modified: specified new "
                        "message content and reply markup are exactly the same as a "
                        "current content and reply markup of the message",
                    )
                call.text = self.messages[key] = text
                self.markups[key] = markup
                return self._result(p, p["message_id"], text) | {"edit_date": int(time.time())}
        raise ApiError(404, "Not Found: method not found")

    def _check_draft(self, p: dict[str, Any]) -> None:
        if not self.drafts_supported:
            raise ApiError(404, "Not Found: method not found")
        draft_id = p.get("draft_id")
        if not isinstance(draft_id, int) or draft_id == 0:
            raise ApiError(400, "Bad Request: draft_id must be a non-zero integer")
        if p["chat_id"] <= 0:  # "live drafts can only be sent to users"
            raise ApiError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        for flag in ("can_stop", "keep_on_stop"):
            if flag in p and not isinstance(p[flag], bool):
                raise ApiError(400, f"Bad Request: {flag} must be a boolean")

    def _draft(self, call: Call) -> bool:
        p = call.params
        call.text = self._visible(p, empty_ok=True)
        self.drafts[(p["chat_id"], p.get("message_thread_id") or 0, p["draft_id"])] = call.text
        return True

    def _guest_answer(self, call: Call) -> dict[str, Any]:
        p = call.params
        query = str(p.get("guest_query_id"))
        made, window = self._guest_queries.get(query), self.guest_window_s
        expired = made is not None and window is not None and call.at - made > window
        if made is None or query in self.guest_answers or expired:
            raise ApiError(400, "Bad Request: QUERY_ID_INVALID")
        result = p.get("result")
        if not isinstance(result, dict) or result.get("type") != "article":
            raise ApiError(400, "Bad Request: RESULT_TYPE_INVALID")
        shown = result.get("input_message_content") or {}
        text = {"text": shown.get("message_text", ""), "parse_mode": shown.get("parse_mode")}
        call.text = self.guest_answers[query] = self._visible(text)
        return {"inline_message_id": f"im-{query}"}

    def _drop_drafts(self, chat_id: int) -> None:
        for key in [key for key in self.drafts if key[0] == chat_id]:
            del self.drafts[key]

    def _upload(self, call: Call) -> dict[str, Any]:
        """A multipart upload: the file field is named by `attach://<field>` in the method's."""
        p = call.params
        reference = str(p.get(UPLOADS[call.method], ""))
        field = (
            p.get(reference.removeprefix("attach://"))
            if reference.startswith("attach://")
            else None
        )
        if not isinstance(field, web.FileField):
            raise ApiError(400, "Bad Request: there is no file in the request")
        data = field.file.read()
        if call.method == "sendphoto":
            _check_photo(data)
        message_id = call.message_id = next(self._message_ids)
        self._drop_drafts(p["chat_id"])
        caption = p.get("caption")
        self.uploads.append(
            Upload(call.method, p["chat_id"], field.filename, data, caption, message_id)
        )
        call.params = {k: v for k, v in p.items() if not isinstance(v, web.FileField)}
        result = self._result(p, message_id, "")
        del result["text"]
        kind = UPLOADS[call.method]
        item = {"file_id": f"sent-{message_id}", "file_unique_id": f"u{message_id}"}
        if kind == "photo":
            result["photo"] = [item | {"width": 1, "height": 1}]
        else:
            result[kind] = item | ({"duration": 1} if kind in ("voice", "audio") else {})
        if caption:
            result["caption"] = caption
        return result

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401}, status=401)
        path = request.match_info["path"]
        if self.files_gone:
            return web.json_response({"ok": False, "error_code": 404}, status=404)
        self.downloads.append(path)
        self._notify()
        if self.downloads_held is not None:
            await self.downloads_held.wait()
        for file_path, data in self.files.values():
            if file_path == path:
                return web.Response(body=data, content_type="application/octet-stream")
        return web.json_response({"ok": False, "error_code": 404}, status=404)

    def _check_rate(self, call: Call) -> None:
        chat, now = call.chat_id, call.at
        assert chat is not None, "a rated call without chat_id"
        banned = self._banned_until.get(chat, 0.0)
        if now < banned:
            raise ApiError(
                429,
                f"Too Many Requests: retry after {math.ceil(banned - now)}",
                math.ceil(banned - now),
            )
        retry = self._forced.pop(chat, None)
        gap = now - self._last.get(chat, -math.inf)
        if retry is None and gap < self.interval_s:
            retry = max(1, math.ceil(self.interval_s - gap))
        if retry is not None:
            self._banned_until[chat] = now + retry
            raise ApiError(429, f"Too Many Requests: retry after {retry}", retry)
        self._last[chat] = now

    def _visible(self, p: dict[str, Any], *, empty_ok: bool = False) -> str:
        text = str(p.get("text", ""))
        if str(p.get("parse_mode", "")).lower() == "html":
            if self.fail_parse_next:
                self.fail_parse_next -= 1
                raise ApiError(
                    400,
                    "Bad Request: can't parse entities: Unsupported start tag "
                    '"foo" at byte offset 0',
                )
            text = _HtmlCheck.visible(text)
        if not text.strip() and not empty_ok:
            raise ApiError(400, "Bad Request: message text is empty")
        if len(text.encode("utf-16-le")) // 2 > 4096:
            raise ApiError(400, "Bad Request: message is too long")
        return text

    def _result(self, p: dict[str, Any], message_id: int, text: str) -> dict[str, Any]:
        chat_id = p["chat_id"]
        chat = (
            {"id": chat_id, "type": "private", "first_name": "U"}
            if chat_id > 0
            else {"id": chat_id, "type": "supergroup", "title": "Group"}
        )
        result = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat,
            "from": self.bot,
            "text": text,
        }
        if p.get("message_thread_id"):
            result["message_thread_id"] = p["message_thread_id"]
        return result

    async def _get_updates(self, offset: int | None, timeout: int) -> list[dict[str, Any]]:
        if offset is not None:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        try:
            async with asyncio.timeout(0 if self.poll_answers_at_once else timeout):
                while not self._updates and not self._closing:
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            pass
        return self._updates[:100]


class _HtmlCheck(HTMLParser):
    """Telegram's HTML rules, as far as our renderer can break them: known tags, balanced."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []

    @classmethod
    def visible(cls, html: str) -> str:
        parser = cls()
        parser.feed(html)
        parser.close()
        if parser.stack:
            raise ApiError(
                400,
                "Bad Request: can't parse entities: Can't find end tag "
                f'corresponding to start tag "{parser.stack[-1]}"',
            )
        return "".join(parser.text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TAGS or (tag == "a" and not dict(attrs).get("href")):
            raise ApiError(
                400, f'Bad Request: can\'t parse entities: Unsupported start tag "{tag}"'
            )
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            raise ApiError(400, f'Bad Request: can\'t parse entities: Unexpected end tag "{tag}"')
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _draw(counts: dict[str, int], method: str) -> bool:
    """Take one scripted fault for `method`, if any is left."""
    if counts.get(method, 0) <= 0:
        return False
    counts[method] -= 1
    return True


def _decode(name: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if name in INT_FIELDS:
        return int(value)
    if name in JSON_FIELDS:
        return json.loads(value)
    return value


def _check_photo(data: bytes) -> None:
    """What Telegram refuses as a photo: over 10 MB, not an image it reads, width + height over
    10000, or one side over 20 times the other."""
    if len(data) > 10 * 1024 * 1024:
        raise ApiError(400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except OSError:
        raise ApiError(400, "Bad Request: IMAGE_PROCESS_FAILED") from None
    if width + height > 10_000 or max(width, height) > 20 * min(width, height):
        raise ApiError(400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
