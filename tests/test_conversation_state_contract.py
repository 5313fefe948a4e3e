"""The `ConversationState` contract, for every implementation: defaults, versions, atomic
read-modify-write, isolation per conversation, and a new instance over the same backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from bot.pipeline.conversation_state import (
    DEFAULT,
    ConversationState,
    MemoryConversationState,
    StateSnapshot,
    StoredConversationState,
)
from bot.redis.states import RedisStateRecords, state_key
from bot.storage.backends import build_store
from tests.pg_kit import pg_database, pg_url
from tests.redis_kit import redis_prefix

__all__ = ["pg_database", "pg_url"]  # fixtures the store cases use

# A new instance over the same backend, as another process (or the next start) makes one.
MakeState = Callable[[], ConversationState]


@pytest.fixture(
    params=["memory", "sqlite", "sqlite-alone", "postgresql", "postgresql-alone", "redis"]
)
def backend(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The implementation under test, and the database url of a PostgreSQL one."""
    url = request.getfixturevalue("pg_url") if request.param.startswith("postgresql") else None
    return request.param, url


@pytest.fixture
async def make(backend: tuple[str, str | None], tmp_path: Path) -> AsyncIterator[MakeState]:
    kind, url = backend
    if kind == "memory":
        shared = MemoryConversationState()  # one process's: every "instance" is the same one
        yield lambda: shared
        return
    if kind == "redis":
        async with redis_prefix() as (redis, prefix):
            yield lambda: StoredConversationState(RedisStateRecords(redis, prefix=prefix))
        return
    if kind.endswith("-alone"):  # one process, its only writer: every "instance" is the same
        async with build_store(tmp_path / "bot.db", url) as store:
            alone = StoredConversationState(store, alone=True)
            yield lambda: alone
        return
    async with AsyncExitStack() as stack:
        opened = []
        for _ in range(2):  # two stores on one database: two processes
            opened.append(await stack.enter_async_context(build_store(tmp_path / "bot.db", url)))
        turn = iter(range(1_000_000))
        yield lambda: StoredConversationState(opened[next(turn) % 2])


def _set_mode(mode: str, assignee: str | None = None) -> Callable[[StateSnapshot], StateSnapshot]:
    return lambda state: replace(state, mode=mode, assignee=assignee)  # type: ignore[arg-type]


async def test_an_unknown_conversation_has_the_defaults(make: MakeState) -> None:
    state = make()
    assert await state.get("telegram:1") == DEFAULT
    assert await state.mode("telegram:1") == "bot"
    assert DEFAULT.version == 0 and dict(DEFAULT.settings) == {} and DEFAULT.assignee is None


async def test_an_update_is_read_back_with_the_next_version(make: MakeState) -> None:
    state = make()
    first = await state.update("k", _set_mode("waiting"))
    assert (first.mode, first.version) == ("waiting", 1)
    second = await state.update("k", _set_mode("human", "operator:anna"))
    assert (second.mode, second.assignee, second.version) == ("human", "operator:anna", 2)
    assert second.updated_at >= first.updated_at > 0
    assert await state.get("k") == second
    assert await state.mode("k") == "human"
    back = await state.update("k", _set_mode("bot"))
    assert (back.mode, back.assignee, back.version) == ("bot", None, 3)


async def test_settings_are_a_string_map(make: MakeState) -> None:
    state = make()
    await state.update("k", lambda s: s.with_setting("model", "fast").with_setting("persona", "ü"))
    await state.update("k", lambda s: s.with_setting("persona", None))
    got = await state.get("k")
    assert dict(got.settings) == {"model": "fast"} and got.mode == "bot" and got.version == 2
    with pytest.raises(TypeError):
        got.settings["model"] = "slow"  # type: ignore[index]  # a state is a value


async def test_concurrent_updates_all_land(make: MakeState) -> None:
    """Each writer reads, changes one setting and writes back: none overwrites another's."""
    names = [f"s{i}" for i in range(8)]
    writers = [make() for _ in names]

    def setting(name: str) -> Callable[[StateSnapshot], StateSnapshot]:
        return lambda state: state.with_setting(name, "1")

    await asyncio.gather(*(w.update("k", setting(n)) for w, n in zip(writers, names, strict=True)))
    got = await make().get("k")
    assert sorted(got.settings) == names
    assert got.version == len(names)


async def test_conversations_are_isolated(make: MakeState) -> None:
    state = make()
    await state.update("telegram:1", _set_mode("human", "op"))
    await state.update("telegram:2", lambda s: s.with_setting("model", "m"))
    assert await state.mode("telegram:2") == "bot"
    assert dict((await state.get("telegram:1")).settings) == {}
    assert await state.get("telegram:3") == DEFAULT


async def test_a_new_instance_over_the_same_backend_sees_the_state(make: MakeState) -> None:
    changed = await make().update("slack:T1/C1/1.0", _set_mode("waiting"))
    assert await make().get("slack:T1/C1/1.0") == changed


async def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown conversation mode 'asleep'"):
        StateSnapshot(mode="asleep")  # type: ignore[arg-type]


async def test_in_redis_a_conversation_nobody_changed_has_no_hash() -> None:
    """The routing step reads the mode of every message: for most it is a miss, not a record."""
    async with redis_prefix() as (redis, prefix):
        state = StoredConversationState(RedisStateRecords(redis, prefix=prefix))
        assert await state.mode("k") == "bot"
        assert not await redis.exists(state_key(prefix, "k"))
        await state.update("k", _set_mode("waiting"))
        assert await redis.hget(state_key(prefix, "k"), "mode") == "waiting"


async def test_alone_a_state_is_read_once_and_a_change_that_lost_reads_the_records(
    tmp_path: Path,
) -> None:
    """One process (no Redis) is the records' only writer: what it read or wrote is kept, not
    read again. Should another writer move a state all the same (which one process never
    meets), the kept state loses the compare-and-set and the change is made on the records'."""
    async with build_store(tmp_path / "bot.db", None) as store:
        alone = StoredConversationState(store, alone=True)
        behind = StoredConversationState(store)
        assert await alone.get("k") == DEFAULT
        await behind.update("k", _set_mode("waiting"))
        assert await alone.get("k") == DEFAULT  # kept: not read again
        changed = await alone.update("k", _set_mode("human", "operator:anna"))
        assert (changed.mode, changed.assignee, changed.version) == ("human", "operator:anna", 2)
        assert await alone.get("k") == changed == await behind.get("k")
