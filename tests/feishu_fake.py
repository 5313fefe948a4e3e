"""A local Feishu Open API for the real lark-oapi client: records every call, enforces the rules.

It answers in Feishu's shapes (`{"code": 0, "msg": "success", "data": {…}}`, errors as HTTP 400
with a non-zero code) and enforces what the platform enforces (platforms.md §3.2, §6): a tenant
token on every call; a `uuid` sent twice posts once; CardKit `sequence` strictly increasing per
card (300317); a card entity sent once; 20 `PUT` edits per message (230072); card or post JSON
≤ 30 KB (230025); sends ≤ `chat_per_s` per chat (230020); card operations ≤ `card_per_s` per
card (10 a second), element content writes ≤ 50 a second per app, and calls ≤ `app_per_s` per
app (HTTP 429, 99991400, with `x-ogw-ratelimit-reset`).
CardKit cards: a card's streaming mode closes `stream_timeout_s` (600) after it was last turned
on (at creation, or by the settings call with `streaming_mode: true`); a whole-card update keeps
it closed once closed; an element content write to a card not streaming is refused (300309,
"streaming mode is closed"). Card JSON is checked as 2.0 is: element ids (a letter, then
letters, digits and `_`, at most 20) unique in the card (300301), a `collapsible_panel` has a
`header` and no `form` inside, a button has `text` and `behaviors`.

Scripted faults: `gone_next` (the next edit finds its message recalled), `refuse[kind]` (every such call fails with that code), `force_429[kind]` (the next call of that kind is rate limited), and a call carried
out whose answer is lost: `hang_next[kind]` (no answer) or `garble_next[kind]` (a proxy's HTML page).
Kinds: token, message (create or reply), edit, patch, card_create, content, settings, card_update;
`any` in `force_429` is the next call that shows or changes an answer, whichever it is.
Files: `user_file()` holds a file a user sent (its message and key) for the message-resource
download (`GET …/messages/{id}/resources/{key}?type=`, bytes, recorded in `downloads`);
`POST /im/v1/images` and `/im/v1/files` take multipart uploads (kinds `image_upload`,
`file_upload`) whose keys an `image`, `file` or `audio` message then shows (`uploads()`).
The long-connection endpoint is in tests/feishu_fake_ws.py.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.feishu_card_rules import FeishuError, check_card
from tests.feishu_fake_ws import LongConnectionEndpoint

APP_ID = "cli_test_app"
APP_SECRET = "test-secret"
BOT_OPEN_ID = "ou_bot"
MAX_CARD_BYTES = 30_000
# what "any" in force_429 matches: the calls that show or change an answer
DELIVERY = frozenset({"message", "edit", "patch", "content", "settings", "card_update"})
BAD_GATEWAY = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


@dataclass
class Call:
    kind: str
    path: str
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    code: int = 0
    status: int = 200


@dataclass
class Message:
    message_id: str
    chat_id: str
    msg_type: str
    content: str
    parent_id: str = ""
    card_id: str | None = None
    edits: int = 0
    from_user: bool = False


@dataclass
class CardEntity:
    card: dict[str, Any]
    sequence: int = 0
    sent: bool = False
    updates: int = 0
    timeout_s: float = 600.0
    opened_at: float = field(default_factory=time.monotonic)  # streaming last turned on
    timed_out: int = 0  # times Feishu closed its stream itself

    @property
    def streaming(self) -> bool:
        config = self.card.setdefault("config", {})
        if config.get("streaming_mode") and time.monotonic() - self.opened_at >= self.timeout_s:
            config["streaming_mode"] = False  # closed by Feishu, as after 10 minutes
            self.timed_out += 1
        return bool(config.get("streaming_mode"))


class FakeFeishu:
    def __init__(
        self,
        *,
        chat_per_s: float = 5.0,
        card_per_s: float = 10.0,
        app_per_s: float = 50.0,
        stream_timeout_s: float = 600.0,
    ) -> None:
        self.stream_timeout_s = stream_timeout_s
        self.calls: list[Call] = []
        self.messages: dict[str, Message] = {}
        self.cards: dict[str, CardEntity] = {}
        self.force_429: Counter[str] = Counter()
        self.hang_next: Counter[str] = Counter()
        self.garble_next: Counter[str] = Counter()
        self.refuse: dict[str, tuple[int, str]] = {}
        self.gone_next = 0
        self.token_delay_s = 0.0  # a slow token endpoint  # the next edit finds its message recalled by the user  # kind -> the error every such call gets
        self.retry_after = 1
        self.secret = APP_SECRET
        # the element content endpoint has its own 50 a second per app [doc], within the app's
        self._limits = {"chat": chat_per_s, "card": card_per_s, "app": app_per_s, "content": 50.0}
        self._recent: dict[str, list[float]] = defaultdict(list)  # scope -> call times
        self._uuids: dict[str, str] = {}
        self._ids = itertools.count(1)
        self._tokens: set[str] = set()
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.ws = LongConnectionEndpoint(self)
        self.resources: dict[tuple[str, str], tuple[str, bytes]] = {}  # (message, key) -> file
        self.downloads: list[str] = []  # keys the bot downloaded
        self.chunked = False  # downloads stream without a Content-Length
        self.uploaded: dict[str, tuple[str, bytes]] = {}  # image or file key -> (name, bytes)
        self.url = ""

    # --- views for tests ----------------------------------------------------------------------

    def bot_messages(self, chat_id: str) -> list[Message]:
        return [m for m in self.messages.values() if m.chat_id == chat_id and not m.from_user]

    def user_message(self, chat_id: str, text: str, message_id: str | None = None) -> str:
        """A message a user wrote in the chat (something to reply to); returns its id."""
        content = json.dumps({"text": text})
        message_id = message_id or f"om_user_{next(self._ids)}"
        message = Message(message_id, chat_id, "text", content, from_user=True)
        self.messages[message.message_id] = message
        return message.message_id

    def user_file(self, chat_id: str, data: bytes, name: str, kind: str = "file") -> str:
        """A file (or image) a user sent in the chat: its message id; its key is `key_<id>`."""
        message_id = f"om_user_{next(self._ids)}"
        key = f"{'img' if kind == 'image' else 'file'}_{message_id}"
        content = {"image_key": key} if kind == "image" else {"file_key": key, "file_name": name}
        self.messages[message_id] = Message(
            message_id, chat_id, kind, json.dumps(content), from_user=True
        )
        self.resources[(message_id, key)] = (name, data)
        return message_id

    def uploads(self, chat_id: str) -> list[tuple[str, bytes]]:
        """The files the bot's image, file and audio messages in the chat show."""
        shown = []
        for message in self.bot_messages(chat_id):
            if message.msg_type in ("image", "file", "audio"):
                body = json.loads(message.content)
                shown.append(self.uploaded[body.get("image_key") or body.get("file_key")])
        return shown

    def text_of(self, message: Message) -> str:
        """The markdown the message shows (a card's answer element, a post's md paragraph)."""
        if message.msg_type == "interactive":
            card = (
                self.cards[message.card_id].card if message.card_id else json.loads(message.content)
            )
            return str(card["body"]["elements"][0]["content"])
        body = json.loads(message.content)
        if message.msg_type == "text":
            return str(body["text"])
        return "".join(node.get("text", "") for line in body["zh_cn"]["content"] for node in line)

    def card_of(self, message: Message) -> dict[str, Any]:
        """The card JSON a card message shows now."""
        if message.card_id:
            return self.cards[message.card_id].card
        return dict(json.loads(message.content))

    def refused_for_rate(self) -> list[Call]:
        """Calls the fake refused as over a rate (per card, per chat, per app)."""
        return [c for c in self.calls if c.code in (99991400, 230020)]

    def streaming(self, message: Message) -> bool:
        return message.card_id is not None and self.cards[message.card_id].streaming

    def of(self, *kinds: str, ok: bool | None = None) -> list[Call]:
        return [c for c in self.calls if c.kind in kinds and (ok is None or (c.code == 0) == ok)]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    # --- server -------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        add = app.router.add_route
        add("POST", "/open-apis/auth/v3/tenant_access_token/internal", self._token)
        add("GET", "/open-apis/bot/v3/info", self._route("bot", self._bot_info))
        add("POST", "/open-apis/im/v1/messages", self._route("message", self._create))
        add("POST", "/open-apis/im/v1/messages/{id}/reply", self._route("message", self._create))
        add("PUT", "/open-apis/im/v1/messages/{id}", self._route("edit", self._edit))
        add("PATCH", "/open-apis/im/v1/messages/{id}", self._route("patch", self._patch))
        add("POST", "/open-apis/cardkit/v1/cards", self._route("card_create", self._card_create))
        content = "/open-apis/cardkit/v1/cards/{card}/elements/{element}/content"
        add("PUT", content, self._route("content", self._content))
        add(
            "PATCH",
            "/open-apis/cardkit/v1/cards/{card}/settings",
            self._route("settings", self._settings),
        )
        add(
            "PUT",
            "/open-apis/cardkit/v1/cards/{card}",
            self._route("card_update", self._card_update),
        )
        add("GET", "/open-apis/im/v1/messages/{id}/resources/{key}", self._resource)
        add("POST", "/open-apis/im/v1/images", self._upload("image_upload"))
        add("POST", "/open-apis/im/v1/files", self._upload("file_upload"))
        self.ws.install(app)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def close(self) -> None:
        await self.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _token(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls.append(Call("token", request.path, body))
        await asyncio.sleep(self.token_delay_s)
        if body.get("app_id") != APP_ID or body.get("app_secret") != self.secret:
            return web.json_response({"code": 10014, "msg": "app secret invalid"}, status=400)
        token = f"t-{next(self._ids)}"
        self._tokens.add(token)
        return web.json_response(
            {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200}
        )

    def _route(self, kind: str, handler: Callable[..., Any]) -> Callable[[web.Request], Any]:
        async def answer(request: web.Request) -> web.Response:
            body = await request.json() if request.can_read_body else {}
            call = Call(kind, request.path, body)
            self.calls.append(call)
            try:
                if (
                    request.headers.get("Authorization", "").removeprefix("Bearer ")
                    not in self._tokens
                ):
                    raise FeishuError(99991663, "invalid tenant access token")
                if kind in self.refuse:
                    raise FeishuError(*self.refuse[kind])
                self._rate(kind, request, body)
                data = handler(request, body)
            except FeishuError as exc:
                call.code, call.status = exc.code, exc.status
                headers = {"x-ogw-ratelimit-reset": str(exc.reset)} if exc.reset else {}
                return web.json_response(
                    {"code": exc.code, "msg": exc.msg}, status=exc.status, headers=headers
                )
            finally:
                self._changed.set()
            if self.hang_next[kind]:
                self.hang_next[kind] -= 1
                await asyncio.Event().wait()
            if self.garble_next[kind]:
                self.garble_next[kind] -= 1
                return web.Response(text=BAD_GATEWAY, status=502, content_type="text/html")
            if kind == "bot":
                return web.json_response({"code": 0, "msg": "ok", "bot": data})
            return web.json_response({"code": 0, "msg": "success", "data": data})

        return answer

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization", "").removeprefix("Bearer ") in self._tokens

    async def _resource(self, request: web.Request) -> web.StreamResponse:
        message_id, key = request.match_info["id"], request.match_info["key"]
        self.calls.append(Call("resource", request.path, dict(request.query)))
        if not self._authorized(request):
            return web.json_response({"code": 99991663, "msg": "invalid token"}, status=400)
        held = self.resources.get((message_id, key))
        if held is None:
            return web.json_response({"code": 234003, "msg": "file not in message"}, status=400)
        wanted = "image" if key.startswith("img_") else "file"
        if request.query.get("type") != wanted:
            return web.json_response({"code": 234001, "msg": "invalid type"}, status=400)
        self.downloads.append(key)
        self._changed.set()
        name, data = held
        headers = {"Content-Disposition": f'attachment; filename="{name}"'}
        if not self.chunked:
            return web.Response(body=data, content_type="application/octet-stream", headers=headers)
        response = web.StreamResponse(headers=headers)
        response.content_type = "application/octet-stream"
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(data), 512):
            await response.write(data[start : start + 512])
        await response.write_eof()
        return response

    def _upload(self, kind: str) -> Callable[[web.Request], Any]:
        async def answer(request: web.Request) -> web.Response:
            form = await request.post()
            fields = {k: v for k, v in form.items() if not isinstance(v, web.FileField)}
            self.calls.append(Call(kind, request.path, fields))
            self._changed.set()
            if not self._authorized(request):
                return web.json_response({"code": 99991663, "msg": "invalid token"}, status=400)
            field = form.get("image" if kind == "image_upload" else "file")
            if not isinstance(field, web.FileField):
                return web.json_response({"code": 234001, "msg": "no file"}, status=400)
            data = field.file.read()
            if kind == "image_upload":
                if fields.get("image_type") != "message" or len(data) > 10 * 1024 * 1024:
                    return web.json_response({"code": 234006, "msg": "bad image"}, status=400)
                key = f"img_up_{next(self._ids)}"
                self.uploaded[key] = (field.filename, data)
                return web.json_response({"code": 0, "msg": "ok", "data": {"image_key": key}})
            if not fields.get("file_type") or not fields.get("file_name"):
                return web.json_response(
                    {"code": 234001, "msg": "file_type, file_name"}, status=400
                )
            key = f"file_up_{next(self._ids)}"
            self.uploaded[key] = (str(fields["file_name"]), data)
            return web.json_response({"code": 0, "msg": "ok", "data": {"file_key": key}})

        return answer

    def _rate(self, kind: str, request: web.Request, body: dict[str, Any]) -> None:
        armed = kind if self.force_429[kind] else "any" if kind in DELIVERY else None
        if armed and self.force_429[armed]:
            self.force_429[armed] -= 1
            raise FeishuError(99991400, "request trigger frequency limit", 429, self.retry_after)
        scopes = [("app", "app")]
        if kind == "message":
            chat = body.get("receive_id") or self._parent_chat(request.match_info.get("id", ""))
            scopes.append(("chat", f"chat:{chat}"))
        if kind in ("content", "settings", "card_update"):
            scopes.append(("card", f"card:{request.match_info['card']}"))
        if kind == "content":
            scopes.append(("content", "content"))
        now = time.monotonic()
        for limit, scope in scopes:
            recent = [t for t in self._recent[scope] if now - t < 1.0]
            self._recent[scope] = recent
            if len(recent) >= self._limits[limit]:
                code = 230020 if limit == "chat" else 99991400
                raise FeishuError(code, "frequency limit", 429 if code != 230020 else 400, 1)
        for _, scope in scopes:
            self._recent[scope].append(now)

    def _parent_chat(self, message_id: str) -> str:
        parent = self.messages.get(message_id)
        return parent.chat_id if parent else "oc_user_chat"

    # --- handlers -----------------------------------------------------------------------------

    def _bot_info(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        return {"open_id": BOT_OPEN_ID, "app_name": "Test bot"}

    def _create(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        key = body.get("uuid")
        if key and key in self._uuids:
            return self._object(self.messages[self._uuids[key]])
        parent = request.match_info.get("id", "")
        chat_id = body.get("receive_id") or self._parent_chat(parent)
        msg_type, content = body["msg_type"], body["content"]
        card_id = None
        if msg_type == "interactive":
            parsed = json.loads(content)
            if parsed.get("type") == "card":
                card_id = parsed["data"]["card_id"]
                entity = self.cards.get(card_id)
                if entity is None or entity.sent:
                    raise FeishuError(300315, "card entity not found or already sent")
                entity.sent = True
        self._check_size(content)
        message = Message(f"om_{next(self._ids)}", chat_id, msg_type, content, parent, card_id)
        self.messages[message.message_id] = message
        if key:
            self._uuids[key] = message.message_id
        return self._object(message)

    def _object(self, message: Message) -> dict[str, Any]:
        return {
            "message_id": message.message_id,
            "chat_id": message.chat_id,
            "msg_type": message.msg_type,
            "parent_id": message.parent_id,
            "body": {"content": message.content},
            "sender": {"id": APP_ID, "id_type": "app_id", "sender_type": "app"},
        }

    def _mine(self, request: web.Request) -> Message:
        message = self.messages.get(request.match_info["id"])
        if message is None:
            raise FeishuError(231003, "message not found")
        if message.from_user:
            raise FeishuError(230027, "only the sender may change a message")
        return message

    def _edit(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        message = self._mine(request)
        if self.gone_next:
            self.gone_next -= 1
            del self.messages[message.message_id]
            raise FeishuError(230011, "the message was recalled")
        if message.msg_type not in ("text", "post") or body.get("msg_type") not in ("text", "post"):
            raise FeishuError(230001, "only text and post messages can be edited")
        if message.edits >= 20:
            raise FeishuError(
                230072, "the message has reached the number of times it can be edited"
            )
        self._check_size(body["content"])
        message.edits += 1
        message.msg_type, message.content = body["msg_type"], body["content"]
        return self._object(message)

    def _patch(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        message = self._mine(request)
        if message.msg_type != "interactive" or message.card_id:
            raise FeishuError(230001, "not a card sent inline")
        self._check_size(body["content"])
        message.content = body["content"]
        return {}

    def _card_create(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("type") != "card_json":
            raise FeishuError(300301, "unsupported card type")
        self._check_size(body["data"])
        card = json.loads(body["data"])
        check_card(card)
        card_id = f"card_{next(self._ids)}"
        self.cards[card_id] = CardEntity(card, timeout_s=self.stream_timeout_s)
        return {"card_id": card_id}

    def _card(self, request: web.Request, body: dict[str, Any]) -> CardEntity:
        entity = self.cards.get(request.match_info["card"])
        if entity is None:
            raise FeishuError(300310, "card not found")
        sequence = body.get("sequence")
        if not isinstance(sequence, int) or sequence <= entity.sequence:
            raise FeishuError(300317, "sequence number compare failed")
        entity.sequence = sequence
        entity.updates += 1
        return entity

    def _content(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        entity = self._card(request, body)
        if not entity.streaming:
            raise FeishuError(300309, "streaming mode is closed")
        for element in entity.card["body"]["elements"]:
            if element.get("element_id") == request.match_info["element"]:
                element["content"] = body["content"]
                self._check_size(json.dumps(entity.card, ensure_ascii=False))
                return {}
        raise FeishuError(300313, "not find elementID")

    def _settings(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        entity = self._card(request, body)
        config = json.loads(body["settings"])["config"]
        if config.get("streaming_mode"):
            entity.opened_at = time.monotonic()
        entity.card.setdefault("config", {}).update(config)
        return {}

    def _card_update(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        entity = self._card(request, body)
        if body["card"].get("type") != "card_json":
            raise FeishuError(300301, "unsupported card type")
        self._check_size(body["card"]["data"])
        card = json.loads(body["card"]["data"])
        check_card(card)
        was_streaming = entity.streaming  # a whole-card update does not reopen a closed stream
        entity.card = card
        config = card.setdefault("config", {})
        config["streaming_mode"] = bool(config.get("streaming_mode")) and was_streaming
        return {}

    @staticmethod
    def _check_size(content: str) -> None:
        if len(content.encode()) > MAX_CARD_BYTES:
            raise FeishuError(230025, "the message content is too long")
