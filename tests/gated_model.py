"""A fake OpenAI server that holds each request at a gate the test opens: a turn stays running
exactly as long as the test needs (to reconnect, stop it, start another process), with no
guess at how long anything takes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.fake_llm import Reply, llm_config
from tests.fake_openai import FakeOpenAI
from tests.processes import write_config
from tests.redis_kit import URL


def last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m["role"] == "user"]
    content = users[-1]["content"] if users else ""
    return content if isinstance(content, str) else str(content)


def echo(body: dict[str, Any]) -> Reply:
    """The answer names the question: `answer to <last user text>`."""
    return Reply(text=["answer to ", last_user_text(body)])


class GatedOpenAI(FakeOpenAI):
    """Request n (from 1) is answered once `allow(n)` (or a later one) was called."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("script", echo)
        super().__init__(**kwargs)
        self.held: list[dict[str, Any]] = []  # the bodies of requests that reached the gate
        self._passes = 0
        self._opened = asyncio.Condition()
        self._arrived = asyncio.Event()

    async def allow(self, count: int) -> None:
        """Let the first `count` requests through (those waiting, and those to come)."""
        async with self._opened:
            self._passes = max(self._passes, count)
            self._opened.notify_all()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.held.append(await request.json())
        number = len(self.held)
        self._arrived.set()
        async with self._opened:
            await self._opened.wait_for(lambda: number <= self._passes)
        return await super()._handle(request)

    async def wait_held(self, count: int, timeout: float = 90.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.held) < count:
                self._arrived.clear()
                await self._arrived.wait()


def gated_config(folder: Path, prefix: str, model: GatedOpenAI, **sections: Any) -> Path:
    """`bot serve` on the shared Redis (under `prefix`), its turns waiting at `model`'s gate as
    long as the test wants (the deadlines are far away)."""
    llm = llm_config("openai", model, first_token_timeout_s=250, total_timeout_s=280)
    return write_config(
        folder,
        redis={"url": URL, "prefix": prefix, "lease_s": 2},
        llm=llm | {"max_retries": 0},
        agent={"turn_timeout_s": 280},
        log={"level": "DEBUG"},
        **sections,
    )
