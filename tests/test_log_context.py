"""`bound` adds log context fields for a block, nests, starts fresh on request, refuses typos."""

from __future__ import annotations

import asyncio

import pytest

from agent.log_context import bound, current


async def test_fields_nest_start_fresh_and_reach_tasks_started_inside() -> None:
    with bound(conversation_key="c1", channel="websocket"):
        with bound(turn_id="t1", persona=None):  # None leaves a field as it is
            assert dict(current()) == {
                "conversation_key": "c1",
                "channel": "websocket",
                "turn_id": "t1",
            }
            seen = await asyncio.create_task(_read())  # a task inherits the context
            assert seen["turn_id"] == "t1"
            with bound(fresh=True, task_id="k"):
                assert dict(current()) == {"task_id": "k"}
        assert dict(current()) == {"conversation_key": "c1", "channel": "websocket"}
    assert dict(current()) == {}


async def _read() -> dict[str, str]:
    return dict(current())


def test_an_unknown_field_is_refused_before_anything_is_bound() -> None:
    with pytest.raises(ValueError, match=r"unknown log context field\(s\) \['turn'\]"):
        with bound(turn="t1"):
            pass
    assert dict(current()) == {}
