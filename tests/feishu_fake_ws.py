"""The fake's long-connection endpoint: lark-oapi's own protobuf frames over a web socket.

Bootstrap is `POST /callback/ws/endpoint` (`{"AppID", "AppSecret"}`) answering the socket URL
with `device_id` and `service_id` and a `ClientConfig`; then `GET /ws` upgrades. An event is a
DATA frame (headers `type=event, message_id, trace_id, sum=1, seq=0`, payload the event JSON);
the client echoes the frame back as its ack, payload `{"code": 200}`. Pings are CONTROL frames
answered with a pong (platforms.md §3.3).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from adapters.feishu.sdk import Frame

if TYPE_CHECKING:
    from tests.feishu_fake import FakeFeishu

SERVICE_ID = 7


def _headers(frame: Frame) -> dict[str, str]:
    return {header.key: header.value for header in frame.headers}


class LongConnectionEndpoint:
    def __init__(self, fake: FakeFeishu) -> None:
        self.fake = fake
        self.sockets: list[web.WebSocketResponse] = []
        self.acks: dict[str, dict[str, Any]] = {}  # frame message_id -> the ack's payload
        self.pings = 0
        self.bootstraps = 0
        self._ids = itertools.count(1)
        self._connected = asyncio.Event()
        self._acked = asyncio.Event()

    def install(self, app: web.Application) -> None:
        app.router.add_post("/callback/ws/endpoint", self._endpoint)
        app.router.add_get("/ws", self._socket)

    async def _endpoint(self, request: web.Request) -> web.Response:
        self.bootstraps += 1
        body = await request.json()
        if body.get("AppSecret") != self.fake.secret:
            return web.json_response({"code": 514, "msg": "auth failed"})
        host = request.host
        config = {
            "ReconnectCount": 3,
            "ReconnectInterval": 1,
            "ReconnectNonce": 0,
            "PingInterval": 60,
        }
        url = f"ws://{host}/ws?device_id=dev1&service_id={SERVICE_ID}"
        return web.json_response(
            {"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": config}}
        )

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.sockets.append(ws)
        self._connected.set()
        try:
            async for message in ws:
                if message.type is not WSMsgType.BINARY:
                    continue
                frame = Frame()
                frame.ParseFromString(message.data)
                headers = _headers(frame)
                if frame.method == 0 and headers.get("type") == "ping":
                    self.pings += 1
                    pong = Frame(SeqID=0, LogID=0, service=SERVICE_ID, method=0)
                    pong.headers.add(key="type", value="pong")
                    await ws.send_bytes(pong.SerializeToString())
                elif frame.method == 1:
                    self.acks[headers["message_id"]] = json.loads(frame.payload)
                    self._acked.set()
        finally:
            self.sockets.remove(ws)
        return ws

    async def wait_connected(self, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while not self.sockets:
                self._connected.clear()
                await self._connected.wait()

    async def push(self, payload: dict[str, Any]) -> str:
        """Send one event frame to the connected client; returns the frame's message id."""
        message = (payload.get("event") or {}).get("message")
        if message:  # the user's message is in the chat now: replies find it
            self.fake.user_message(message["chat_id"], "", message_id=message["message_id"])
        frame_id = f"frame-{next(self._ids)}"
        frame = Frame(SeqID=next(self._ids), LogID=0, service=SERVICE_ID, method=1)
        for key, value in (
            ("type", "event"),
            ("message_id", frame_id),
            ("trace_id", "tr"),
            ("sum", "1"),
            ("seq", "0"),
        ):
            frame.headers.add(key=key, value=value)
        frame.payload = json.dumps(payload).encode()
        await self.sockets[0].send_bytes(frame.SerializeToString())
        return frame_id

    async def wait_ack(self, frame_id: str, timeout: float = 20.0) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while frame_id not in self.acks:
                self._acked.clear()
                await self._acked.wait()
        return self.acks[frame_id]

    async def close(self) -> None:
        for ws in list(self.sockets):
            await ws.close()
