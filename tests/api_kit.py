"""A client for the sessions API in tests: keys, requests, and SSE streams read record by record."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import pytest

from adapters.api.keys import hash_key
from agent.providers.base import Provider
from bot.runtime.app import App
from tests.conftest import make_config

KEY_A = "gk_test-key-a-0123456789abcdef0123456789abcdef"
KEY_B = "gk_test-key-b-0123456789abcdef0123456789abcdef"


def api_section(**extra: Any) -> dict[str, Any]:
    """`channels` config with the API on and keys `a` and `b` (as their hashes)."""
    keys = [{"id": "a", "sha256": hash_key(KEY_A)}, {"id": "b", "sha256": hash_key(KEY_B)}]
    return {"api": {"enabled": True, "keys": keys, **extra}}


class StartApi(Protocol):
    async def __call__(self, provider: Provider | None = None, **api: Any) -> App: ...


@pytest.fixture(name="start_api")
async def start_api_fixture(tmp_path: Path) -> AsyncIterator[StartApi]:
    """`app = await start_api(provider, **channels_api_keys)`: a running app with the API on."""
    started: list[App] = []

    async def start(provider: Provider | None = None, **api: Any) -> App:
        app = App(
            make_config(tmp_path, channels=api_section(**api)), base_dir=tmp_path, provider=provider
        )
        await app.__aenter__()
        started.append(app)
        return app

    yield start
    for app in started:
        await app.stop()


@dataclass
class Event:
    type: str
    data: dict[str, Any]
    id: int | None


@dataclass
class Stream:
    status: int
    headers: dict[str, str]
    events: list[Event] = field(default_factory=list)
    comments: int = 0

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def ids(self) -> list[int]:
        return [e.id for e in self.events if e.id is not None]

    def last(self, kind: str) -> dict[str, Any]:
        return [e.data for e in self.events if e.type == kind][-1]


async def read_events(response: aiohttp.ClientResponse) -> AsyncIterator[Event | None]:
    """SSE records as they arrive; None for a comment (a keepalive)."""
    fields: dict[str, str] = {}
    async for raw in response.content:
        line = raw.decode().rstrip("\n")
        if line.startswith(":"):
            yield None
        elif line:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        elif fields:
            seq = fields.get("id")
            yield Event(fields["event"], json.loads(fields["data"]), int(seq) if seq else None)
            fields = {}


class ApiClient:
    def __init__(self, session: aiohttp.ClientSession, app: App, key: str = KEY_A) -> None:
        self.http = session
        self.base = f"{app.url}/api/v1"
        self.key = key

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}", **extra}

    async def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        async with self.http.request(
            method, self.base + path, json=body, headers=self.headers(**(headers or {}))
        ) as response:
            return response.status, await response.json()

    async def new_session(self, user_id: str | None = None) -> str:
        status, body = await self.call(
            "POST", "/sessions", {"user_id": user_id} if user_id else None
        )
        assert status == 201, body
        return str(body["id"])

    async def stream(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        until: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> Stream:
        """The whole stream (to its end, or `until` events); JSON refusals come back as data."""
        async with self.http.request(
            method, self.base + path, json=body, headers=self.headers(**(headers or {}))
        ) as response:
            result = Stream(response.status, dict(response.headers))
            if response.content_type != "text/event-stream":
                result.events.append(Event("refused", await response.json(), None))
                return result
            async for item in read_events(response):
                if item is None:
                    result.comments += 1
                    continue
                result.events.append(item)
                if until is not None and len(result.events) >= until:
                    break
            return result

    async def ask(
        self,
        session_id: str,
        text: str,
        *,
        until: int | None = None,
        headers: dict[str, str] | None = None,
        **fields: Any,
    ) -> Stream:
        path = f"/sessions/{session_id}/messages"
        body = {"text": text, **fields}
        return await self.stream("POST", path, body, until=until, headers=headers)
