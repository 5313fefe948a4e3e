"""Two `bot serve` processes on two "hosts" (network namespaces, tests/netns_kit.py) sharing one
Redis and one PostgreSQL database over the network between them, as on two machines: nothing
on one host reaches the other's loopback.

- A web socket on host A is answered by a turn that runs on host B, because B holds the
  conversation's lease when A takes the message.
- Host A lost (kill -9) mid-turn: host B takes the turn over from PostgreSQL and finishes it in
  the same placeholder, which the widget, reconnected to B, sees by resuming after its `seq`.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.fake_llm import llm_config
from tests.gated_model import GatedOpenAI
from tests.netns_kit import Network, forwards, network
from tests.network_guard import NetworkGuard
from tests.pg_kit import empty_schema, pg_database
from tests.processes import (
    HERE,
    Gateway,
    frames_until,
    one_gateway,
    open_tab,
    resumed_tab,
    write_config,
)
from tests.redis_kit import until_queued
from tests.test_multiprocess import ORIGIN, Visitor

__all__ = ["pg_database"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]


@pytest.fixture
def hosts(network_guard: NetworkGuard) -> Iterator[Network]:
    with network(2) as net:
        network_guard.allow(net.subnet)  # the test's own bridge: it never leaves this machine
        yield net


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def redis_on(address: str) -> AsyncIterator[str]:
    """A Redis of this test's own, listening on the bridge only, with a password (as one
    reached over a network should have; without one it refuses non-loopback clients)."""
    port, password = _free_port(address), uuid.uuid4().hex
    server = await asyncio.create_subprocess_exec(
        *["redis-server", "--bind", address, "--port", str(port), "--requirepass", password],
        *["--save", "", "--appendonly", "no"],
        stdout=asyncio.subprocess.DEVNULL,
    )
    url = f"redis://:{password}@{address}:{port}/0"
    try:
        client = Redis.from_url(url)
        async with asyncio.timeout(10):
            while True:
                try:
                    await client.ping()
                    break
                except (RedisConnectionError, OSError):  # not listening yet
                    await asyncio.sleep(0.05)
        await client.aclose()
        yield url
    finally:
        server.terminate()
        await server.wait()


def _config(folder: Path, address: str, **sections: Any) -> Path:
    folder.mkdir()
    return write_config(
        folder,
        server={"host": address},
        channels={"websocket": {"allowed_origins": [ORIGIN]}},
        agent={"turn_timeout_s": 280},
        log={"level": "DEBUG"},
        **sections,
    )


@dataclass
class Cluster:
    """What both hosts share (reached over the bridge), and each host's config."""

    model: GatedOpenAI
    redis_url: str
    configs: list[Path]
    logs: list[Gateway] = field(default_factory=list)

    def dump(self) -> str:
        return "".join(f"[{g.host}] {line}" for g in self.logs for line in g.log)


@pytest.fixture
async def cluster(hosts: Network, pg_database: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    await empty_schema(pg_database)
    database = pg_database.rsplit("/", 1)[1]
    async with (
        GatedOpenAI() as model,
        redis_on(hosts.gateway) as redis_url,
        forwards(hosts.gateway, ("127.0.0.1", 5432), ("127.0.0.1", model.port)) as (pg, llm),
    ):
        llm_section = llm_config(
            "openai", model, first_token_timeout_s=250, total_timeout_s=280, max_retries=0
        ) | {"base_url": f"http://{hosts.gateway}:{llm.port}/v1"}
        shared = {
            "redis": {"url": redis_url, "lease_s": 2},
            "storage": {"url": f"postgresql://postgres@{hosts.gateway}:{pg.port}/{database}"},
            "llm": llm_section,
        }
        configs = [_config(tmp_path / h.namespace, h.address, **shared) for h in hosts.hosts]
        yield Cluster(model, redis_url, configs)


async def _turns(pg_database: str) -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(pg_database)
    try:
        sql = "select status, final_text, resume_attempts from turns order by seq"
        return [tuple(r) for r in await conn.fetch(sql)]
    finally:
        await conn.close()


async def test_a_socket_on_host_a_is_answered_by_a_turn_on_host_b(
    hosts: Network, cluster: Cluster, pg_database: str, session: aiohttp.ClientSession
) -> None:
    host_a, host_b = hosts.hosts
    model, configs = cluster.model, cluster.configs
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    try:
        async with one_gateway(configs[1], {}, host_b.wrap) as on_b:
            cluster.logs.append(on_b)
            assert on_b.host == host_b.address
            tab_b = Visitor(session, visitor)
            await tab_b.connect(on_b)
            assert tab_b.ws is not None
            await tab_b.ws.send_json(
                {"type": "message", "text": "first", "client_message_id": "c1"}
            )
            await model.wait_held(1)  # B runs the first turn, holding the lease

            async with one_gateway(configs[0], {}, host_a.wrap) as on_a:
                cluster.logs.append(on_a)
                tab_a = Visitor(session, visitor)  # the same visitor's other tab, on A
                await tab_a.connect(on_a)
                second = asyncio.create_task(tab_a.ask(on_a, "second", "c2"))
                await until_queued("bot:", cluster.redis_url)  # behind B's running turn
                await model.allow(2)
                async with asyncio.timeout(90):
                    answer = await second
                assert on_a.logged(HERE) == 0
            assert on_b.logged(HERE) == 2
    except (AssertionError, TimeoutError):
        raise AssertionError(f"the logs:\n{cluster.dump()}") from None
    assert answer["text"] == "answer to second"
    created = [f for f in tab_a.frames if f["type"] == "message.created"]
    assert [f.get("reply_to") for f in created].count("c2") == 1  # one placeholder
    done = [f for f in tab_a.frames if f["type"] == "message.completed"]
    assert [f["message_id"] for f in done].count(answer["message_id"]) == 1  # answered once
    assert await _turns(pg_database) == [
        ("completed", "answer to first", 0),
        ("completed", "answer to second", 0),
    ]


async def test_host_a_lost_mid_turn_host_b_finishes_it_in_the_same_placeholder(
    hosts: Network, cluster: Cluster, pg_database: str, session: aiohttp.ClientSession
) -> None:
    host_a, host_b = hosts.hosts
    model, configs = cluster.model, cluster.configs
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    try:
        async with one_gateway(configs[0], {}, host_a.wrap) as on_a:
            cluster.logs.append(on_a)
            tab = await open_tab(session, on_a, visitor)
            await tab.send_json({"type": "message", "text": "question", "client_message_id": "c1"})
            placeholder = (await frames_until(tab, lambda f: f["type"] == "message.created"))[-1]
            await model.wait_held(1)  # A runs the turn (it was alone)

            async with one_gateway(configs[1], {}, host_b.wrap) as on_b:
                cluster.logs.append(on_b)
                on_a.process.kill()  # the host is lost: nothing of A runs again
                await on_a.process.wait()
                await tab.close()
                await model.allow(5)  # B, once A's lease lapses, asks the model again
                resumed = await resumed_tab(session, on_b, visitor, placeholder, timeout=90)
                assert on_b.logged("resuming turn") == 1
    except (AssertionError, TimeoutError):
        raise AssertionError(f"the logs:\n{cluster.dump()}") from None
    assert resumed[-1]["text"] == "answer to question"
    # no second placeholder: B announces the same one again (docs/websocket-protocol.md, rule 6)
    created = {f["message_id"] for f in resumed if f["type"] == "message.created"}
    assert created <= {placeholder["message_id"]}
    assert await _turns(pg_database) == [("completed", "answer to question", 1)]
