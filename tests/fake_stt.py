"""A fake OpenAI-compatible speech-to-text API: `POST /v1/audio/transcriptions`, as Whisper servers.

It reads the multipart body the real `openai` SDK sends (`file` with its file name and type,
`model`, optional `language`), records it, and answers `{"text": ...}`: the text set for those
bytes with `says`, else "words of <n> bytes". `fail_next` makes the next requests fail: an HTTP
status with an OpenAI-style error body, `"drop"` (the connection closed with no answer) or
`"hang"` (no answer until the client gives up). `hold()` keeps requests waiting until
`release()`, to see how many are in flight at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Self

from aiohttp import BodyPartReader, web

Failure = int | Literal["drop", "hang"]
PATH = "/v1/audio/transcriptions"


@dataclass(frozen=True)
class Transcription:
    """One request as the server read it."""

    filename: str | None
    content_type: str | None
    data: bytes
    model: str | None
    language: str | None
    authorization: str | None


class FakeSTT:
    def __init__(self) -> None:
        self.requests: list[Transcription] = []
        self.texts: dict[bytes, str] = {}
        self.failures: list[Failure] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.url = ""  # the `stt.base_url`: http://127.0.0.1:<port>/v1
        self._gate: asyncio.Event | None = None
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None

    def says(self, data: bytes, text: str) -> None:
        self.texts[data] = text

    def fail_next(self, *failures: Failure) -> None:
        self.failures.extend(failures)

    def hold(self) -> None:
        self._gate = asyncio.Event()

    def release(self) -> None:
        if self._gate is not None:
            self._gate.set()
            self._gate = None

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    async def _transcribe(self, request: web.Request) -> web.StreamResponse:
        fields: dict[str, str] = {}
        upload: tuple[str | None, str | None, bytes] = (None, None, b"")
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            assert isinstance(part, BodyPartReader)
            if part.name == "file":
                upload = (part.filename, part.headers.get("Content-Type"), bytes(await part.read()))
            elif part.name:
                fields[part.name] = await part.text()
        filename, content_type, data = upload
        seen = Transcription(
            filename,
            content_type,
            data,
            fields.get("model"),
            fields.get("language"),
            request.headers.get("Authorization"),
        )
        self.requests.append(seen)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self._changed.set()
        try:
            if self._gate is not None:
                await self._gate.wait()
            failure = self.failures.pop(0) if self.failures else None
            if failure == "hang":
                await asyncio.Event().wait()
            if failure == "drop":
                assert request.transport is not None
                request.transport.close()
                return web.Response()  # never sent: the connection is gone
            if isinstance(failure, int):
                error = {"message": f"scripted failure {failure}", "type": "server_error"}
                return web.json_response({"error": error}, status=failure)
            if not data:
                error = {"message": "no file", "type": "invalid_request_error"}
                return web.json_response({"error": error}, status=400)
            text = self.texts.get(data, f"words of {len(data)} bytes")
            return web.json_response({"text": text})
        finally:
            self.in_flight -= 1
            self._changed.set()

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post(PATH, self._transcribe)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
        if self._runner is not None:
            await self._runner.cleanup()
