"""Shared fixtures: a running app on a free port, a web socket test client, a network guard."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import pytest

from agent.providers.base import Provider
from bot.runtime.app import App
from bot.runtime.config import Config, load_config
from bot.storage import SqliteStore
from tests.network_guard import NetworkGuard
from tests.process_guard import ProcessGuard
from tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parent.parent
ORIGIN = "http://127.0.0.1:8080"


def make_config(tmp_path: Path, **sections: Any) -> Config:
    data: dict[str, Any] = {
        "server": {"port": 0},
        "storage": {"path": str(tmp_path / "bot.db")},
        "personas": {"dirs": [str(ROOT / "personas")]},
    }
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    return load_config(path, env={})


class WsClient:
    """A real web socket client that keeps every frame it received."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []

    async def send(self, **frame: Any) -> None:
        await self.ws.send_json(frame)

    async def next(self, timeout: float = 5.0) -> dict[str, Any]:
        message = await self.ws.receive(timeout=timeout)
        if message.type != aiohttp.WSMsgType.TEXT:
            raise AssertionError(f"expected a text frame, got {message.type} {message.data!r}")
        frame: dict[str, Any] = json.loads(message.data)
        self.frames.append(frame)
        return frame

    async def until(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 5.0
    ) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.next(timeout)
                if predicate(frame):
                    return frame

    async def seen(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 5.0
    ) -> dict[str, Any]:
        """A frame already received that matches, or the next one that does."""
        for frame in self.frames:
            if predicate(frame):
                return frame
        return await self.until(predicate, timeout)

    async def until_type(self, kind: str, timeout: float = 5.0) -> dict[str, Any]:
        return await self.until(lambda f: f["type"] == kind, timeout)

    async def hello(self, visitor_id: str = "visitor-0001", **extra: Any) -> dict[str, Any]:
        await self.send(type="hello", visitor_id=visitor_id, **extra)
        return await self.until_type("ready")

    async def ask(self, text: str, client_message_id: str | None = None) -> dict[str, Any]:
        """Send a message; return its message.completed frame."""
        frame: dict[str, Any] = {"type": "message", "text": text}
        if client_message_id:
            frame["client_message_id"] = client_message_id
        await self.ws.send_json(frame)
        return await self.until_type("message.completed")


PROCESSES = ProcessGuard()


def pytest_configure(config: pytest.Config) -> None:
    config.add_cleanup(PROCESSES.install())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """Every phase of every test, fixtures of any scope included, runs under the process guard."""
    with PROCESSES.running(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    PROCESSES.fail_if_started(report)
    return report


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    """Every test: a connect outside loopback raises, and fails the test even if it was caught."""
    guard = NetworkGuard()
    guard.install(monkeypatch)
    yield guard
    if guard.blocked:
        pytest.fail(f"the test tried to leave loopback: {guard.blocked}", pytrace=False)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


class Running(Protocol):
    """The `running` fixture: start an app with this provider and config sections."""

    async def __call__(
        self,
        provider: Provider | None = None,
        *,
        registry: ToolRegistry | None = None,
        channels: list[Any] | None = None,
        **sections: Any,
    ) -> App: ...


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    """`app = await running(provider, **config_sections)`: a started app, stopped after the test."""
    started: list[App] = []

    async def start(
        provider: Provider | None = None,
        *,
        registry: ToolRegistry | None = None,
        channels: list[Any] | None = None,
        **sections: Any,
    ) -> App:
        config = make_config(tmp_path, **sections)
        app = App(
            config, base_dir=tmp_path, provider=provider, registry=registry, channels=channels
        )
        await app.__aenter__()
        started.append(app)
        return app

    yield start
    for app in started:
        await app.stop()


async def connect(session: aiohttp.ClientSession, app: App, origin: str = ORIGIN) -> WsClient:
    ws = await session.ws_connect(f"{app.url}/ws", headers={"Origin": origin})
    return WsClient(ws)


def db_rows(app: App, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows straight from the app's SQLite file, as an admin would query it."""
    assert isinstance(app.store, SqliteStore), "db_rows reads a SQLite store"
    with sqlite3.connect(app.store.path) as db:
        return db.execute(sql, params).fetchall()


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait until `predicate()` holds, for recorded state that no event marks."""
    try:
        async with asyncio.timeout(timeout):
            while not predicate():  # noqa: ASYNC110 (there is no event to wait on)
                await asyncio.sleep(0.005)  # a poll step, not a guess at how long the work takes
    except TimeoutError:
        raise AssertionError(f"still not true after {timeout} s: {predicate}") from None


async def settled(app: App) -> None:
    """Every specialist has ended and the turns they started are over: no more turns can come."""
    while True:
        await app.gateway.wait_idle()
        workers = [w.task for w in app.workers.tasks.values() if w.task and not w.task.done()]
        if not workers:
            return
        await asyncio.wait(workers)


async def ask_once(
    session: aiohttp.ClientSession, app: App, text: str = "hello?"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A fresh client says hello, asks once; the final frame and every frame it saw."""
    client = await connect(session, app)
    await client.hello()
    completed = await client.ask(text, client_message_id="m1")
    await app.gateway.wait_idle()  # the turn row is written after the final edit
    return completed, client.frames
