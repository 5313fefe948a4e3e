"""Tests for the `@tool` decorator, `ToolRegistry.call` and the built-in clock tool."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel

from tools.base import ToolContext, ToolDeps, ToolError, ToolResult
from tools.builtin import builtin_registry
from tools.builtin.clock import get_current_datetime
from tools.registry import Tool, ToolRegistry, tool


@dataclass
class Scratch:
    """What this module's test tools record and wait on; a fresh one for each test."""

    calls: list[str] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    cleaned_up: bool = False
    barrier: asyncio.Barrier = field(default_factory=lambda: asyncio.Barrier(3))
    order: list[int] = field(default_factory=list)
    finished: dict[int, asyncio.Event] = field(
        default_factory=lambda: {n: asyncio.Event() for n in range(3)}
    )


SCRATCH = Scratch()


@pytest.fixture(autouse=True)
def scratch() -> Scratch:
    global SCRATCH
    SCRATCH = Scratch()
    return SCRATCH


@tool
async def greet(
    ctx: ToolContext, name: str, greeting: Literal["hello", "hi"] = "hello", times: int = 1
) -> str:
    """Greet someone
    by name.

    This second paragraph is for humans, not the model.

    Args:
        name: Who to greet.
        greeting (str): The word to use,
            said first.
        times: How often to say it.

    Returns:
        The greeting.
    """
    SCRATCH.calls.append(name)
    return " ".join([f"{greeting} {name}"] * times)


@tool(name="echo_json", max_result_chars=5)
async def echo(ctx: ToolContext, json: str, copy: bool = False) -> str:
    """Echo text back; names that shadow pydantic's own still work."""
    return json * (2 if copy else 1)


@tool
async def fail(ctx: ToolContext, kind: Literal["tool_error", "crash", "own_timeout"]) -> str:
    """Fail in the requested way."""
    if kind == "tool_error":
        raise ToolError("nothing found for 'zzz'; try a shorter query")
    if kind == "own_timeout":
        raise TimeoutError("upstream took too long")
    raise RuntimeError("boom")


@tool
async def wait_forever(ctx: ToolContext) -> str:
    """Wait on an event that never fires."""
    SCRATCH.started.set()
    try:
        await asyncio.Event().wait()
    finally:
        SCRATCH.cleaned_up = True
    return "unreachable"


@tool(timeout_s=0.01)
async def impatient(ctx: ToolContext) -> str:
    """Wait on an event that never fires, under the tool's own short deadline."""
    await asyncio.Event().wait()
    return "unreachable"


@tool
async def long_text(ctx: ToolContext, size: int) -> str:
    """Return `size` characters."""
    return "x" * size


class Point(BaseModel):
    x: int
    y: int


@dataclass
class Place:
    name: str
    at: Point


@tool
async def structured(
    ctx: ToolContext, kind: Literal["dict", "model", "dataclass", "result"]
) -> Any:
    """Return a structured value."""
    return {
        "dict": {"city": "Zürich", "tags": ["a", "b"], "when": datetime(2024, 1, 2, 3, 4, 5)},
        "model": Point(x=1, y=2),
        "dataclass": Place("home", Point(x=3, y=4)),
        "result": ToolResult("custom", ok=False, display=({"kind": "card"},)),
    }[kind]


@tool
async def step(ctx: ToolContext, n: int) -> str:
    """Meet the other calls, then finish in reverse order of `n`."""
    await SCRATCH.barrier.wait()
    finished = SCRATCH.finished
    if n + 1 in finished:
        await finished[n + 1].wait()
    SCRATCH.order.append(n)
    finished[n].set()
    return f"step {n}"


ALL = (greet, echo, fail, wait_forever, impatient, long_text, structured, step)
NAMES = frozenset(t.name for t in ALL)


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(ALL)


@pytest.fixture
def ctx() -> ToolContext:
    return ToolContext(user_id="u1")


async def call(
    registry: ToolRegistry, name: str, args: Any, ctx: ToolContext, **kw: Any
) -> ToolResult:
    text = args if isinstance(args, str) else json.dumps(args)
    kw.setdefault("allowed", NAMES)
    kw.setdefault("timeout_s", 5)
    return await registry.call(name, text, ctx, **kw)


def test_schema_is_derived_from_signature_and_docstring() -> None:
    spec = greet.spec
    assert (spec.name, greet.name) == ("greet", "greet")
    assert spec.description == "Greet someone by name."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Who to greet."},
            "greeting": {
                "type": "string",
                "enum": ["hello", "hi"],
                "default": "hello",
                "description": "The word to use, said first.",
            },
            "times": {"type": "integer", "default": 1, "description": "How often to say it."},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    assert list(spec.parameters["properties"]) == ["name", "greeting", "times"]
    no_args = wait_forever.spec.parameters
    assert (no_args["properties"], no_args["required"]) == ({}, [])


@tool
async def convert_numpy(ctx: ToolContext, amount: float, to: str = "USD") -> str:
    """Convert an amount
    between currencies.

    Rates come from the configured service.

    Parameters
    ----------
    amount : float
        How much to convert,
        in the source currency.
    to : str, optional
        The target currency code.

    Returns
    -------
    str
        The converted amount.
    """
    return f"{amount} {to}"


@tool
async def convert_rest(ctx: ToolContext, amount: float, to: str = "USD") -> str:
    """Convert an amount between currencies.

    Rates come from the configured service.

    :param amount: How much to convert,
        in the source currency.
    :param str to: The target currency code.
    :returns: The converted amount.
    """
    return f"{amount} {to}"


@pytest.mark.parametrize("converter", [convert_numpy, convert_rest], ids=["numpy", "rest"])
def test_numpy_and_rest_docstrings_describe_the_arguments(converter: Tool) -> None:
    assert converter.description == "Convert an amount between currencies."
    properties = converter.spec.parameters["properties"]
    assert properties["amount"]["description"] == "How much to convert, in the source currency."
    assert properties["to"]["description"] == "The target currency code."


def test_name_override_and_shadowing_parameter_names() -> None:
    assert echo.name == "echo_json" and echo.max_result_chars == 5
    assert impatient.timeout_s == 0.01
    assert set(echo.spec.parameters["properties"]) == {"json", "copy"}
    assert echo.spec.parameters["required"] == ["json"]


def test_bad_definitions_are_refused_with_the_fix() -> None:
    def sync(ctx: ToolContext) -> str:
        """Not async."""
        return ""

    async def undocumented(ctx: ToolContext) -> str:
        return ""

    async def drifted(ctx: ToolContext, a: int) -> str:
        """Docs that name a parameter that is gone.

        Args:
            b: Gone.
        """
        return ""

    with pytest.raises(TypeError, match="async def"):
        tool(sync)  # type: ignore[arg-type]  # the wrong kind of function is the point
    with pytest.raises(TypeError, match="no docstring"):
        tool(undocumented)
    with pytest.raises(ValueError, match=r"\['b'\] not in the signature"):
        tool(drifted)
    with pytest.raises(ValueError, match="name must match"):
        tool(name="has space")(wait_forever.fn)
    with pytest.raises(ValueError, match="'greet' is already registered"):
        ToolRegistry([greet, greet])


async def test_call_happy_path(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await call(registry, "greet", {"name": "Ann", "greeting": "hi", "times": 2}, ctx)
    assert result == ToolResult("hi Ann hi Ann")
    assert SCRATCH.calls == ["Ann"]
    assert (await call(registry, "echo_json", {"json": "ab", "copy": True}, ctx)).text == "abab"
    assert await greet(ctx, name="Bo") == "hello Bo"


async def test_tool_not_allowed_never_runs(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await call(registry, "greet", {"name": "Ann"}, ctx, allowed=["long_text", "nope"])
    assert not result.ok
    assert result.text == "tool 'greet' is not available here; available tools: ['long_text']"
    assert SCRATCH.calls == []


async def test_unknown_tool(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await call(registry, "web_search", {}, ctx, allowed=["greet", "web_search"])
    assert not result.ok
    assert result.text == "unknown tool 'web_search'; available tools: ['greet']"


async def test_bad_json_and_empty_arguments(registry: ToolRegistry, ctx: ToolContext) -> None:
    bad = await call(registry, "greet", '{"name": ', ctx)
    assert not bad.ok
    assert bad.text.startswith("invalid arguments for greet: Expecting value")
    assert bad.text.endswith("; send a JSON object matching the schema")
    not_object = await call(registry, "greet", '["Ann"]', ctx)
    assert "expected a JSON object, got list" in not_object.text and not not_object.ok
    for empty in ("", "  ", "null"):
        result = await call(registry, "long_text", empty, ctx)
        assert "argument 'size': Field required" in result.text  # read as {}


async def test_validation_errors_one_line_each(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await call(registry, "greet", {"greeting": "yo", "times": "many", "loud": True}, ctx)
    assert not result.ok
    assert result.text.splitlines() == [
        "greet: argument 'name': Field required",
        "greet: argument 'greeting': Input should be 'hello' or 'hi'",
        "greet: argument 'times': Input should be a valid integer,"
        " unable to parse string as an integer",
        "greet: argument 'loud': Extra inputs are not permitted",
        "required arguments: ['name']; optional: ['greeting', 'times']",
    ]
    assert SCRATCH.calls == []


async def test_failures_become_results(
    registry: ToolRegistry, ctx: ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    tool_error = await call(registry, "fail", {"kind": "tool_error"}, ctx)
    assert tool_error == ToolResult("fail: nothing found for 'zzz'; try a shorter query", ok=False)
    with caplog.at_level(logging.WARNING, logger="tools.registry"):
        crash = await call(registry, "fail", {"kind": "crash"}, ctx)
    assert crash == ToolResult("tool fail failed: RuntimeError: boom", ok=False)
    assert caplog.records[-1].levelname == "WARNING" and caplog.records[-1].exc_info
    own = await call(registry, "fail", {"kind": "own_timeout"}, ctx)
    assert own.text == "tool fail failed: TimeoutError: upstream took too long"


async def test_timeout_against_a_tool_that_never_answers(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await call(registry, "wait_forever", {}, ctx, timeout_s=0.01)
    assert result == ToolResult("tool wait_forever timed out after 0.01 s", ok=False)
    assert SCRATCH.cleaned_up is True
    own_deadline = await call(registry, "impatient", {}, ctx, timeout_s=60)
    assert own_deadline.text == "tool impatient timed out after 0.01 s"


async def test_cancellation_propagates(registry: ToolRegistry, ctx: ToolContext) -> None:
    task = asyncio.create_task(call(registry, "wait_forever", {}, ctx, timeout_s=60))
    await SCRATCH.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert SCRATCH.cleaned_up is True


async def test_long_results_are_truncated_visibly(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await call(registry, "long_text", {"size": 50}, ctx, max_result_chars=10)
    assert result.text == "x" * 10 + "\n…[truncated 40 characters]"
    exact = await call(registry, "long_text", {"size": 10}, ctx, max_result_chars=10)
    assert exact.text == "x" * 10
    own_budget = await call(registry, "echo_json", {"json": "abcdefgh"}, ctx)
    assert own_budget.text == "abcde\n…[truncated 3 characters]"


async def test_structured_results_become_json(registry: ToolRegistry, ctx: ToolContext) -> None:
    as_dict = await call(registry, "structured", {"kind": "dict"}, ctx)
    assert as_dict.text == '{"city": "Zürich", "tags": ["a", "b"], "when": "2024-01-02 03:04:05"}'
    model = await call(registry, "structured", {"kind": "model"}, ctx)
    assert json.loads(model.text) == {"x": 1, "y": 2}
    place = await call(registry, "structured", {"kind": "dataclass"}, ctx)
    assert json.loads(place.text) == {"name": "home", "at": {"x": 3, "y": 4}}
    passed = await call(registry, "structured", {"kind": "result"}, ctx)
    assert passed == ToolResult("custom", ok=False, display=({"kind": "card"},))


def test_specs_are_cached_per_tuple_of_names(registry: ToolRegistry) -> None:
    first = registry.specs(["step", "missing", "greet"])
    assert [s.name for s in first] == ["step", "greet"]
    assert registry.specs(("step", "missing", "greet")) is first
    assert registry.specs(["greet", "step"]) is not first
    assert registry.names()[:2] == ["greet", "echo_json"]
    assert "greet" in registry and "nope" not in registry
    assert registry.get("greet") is greet and registry.get("nope") is None


async def test_parallel_calls_run_concurrently(registry: ToolRegistry, ctx: ToolContext) -> None:
    # Each call waits until all three have started, so a sequential registry would hang here.
    async with asyncio.timeout(5):
        results = await asyncio.gather(*(call(registry, "step", {"n": n}, ctx) for n in range(3)))
    assert [r.text for r in results] == ["step 0", "step 1", "step 2"]
    assert SCRATCH.order == [2, 1, 0]


async def clock(args: dict[str, Any], deps: ToolDeps | None = None) -> ToolResult:
    ctx = ToolContext(user_id="u1", deps=deps or ToolDeps())
    return await builtin_registry().call(
        "get_current_datetime", json.dumps(args), ctx, allowed={"get_current_datetime"}, timeout_s=5
    )


async def test_clock_full_format_in_a_fixed_offset_zone() -> None:
    result = await clock({"timezone": "Asia/Kolkata"})
    data = json.loads(result.text)
    assert list(data) == ["timezone", "datetime", "date", "time", "weekday", "utc_offset"]
    assert (data["timezone"], data["utc_offset"]) == ("Asia/Kolkata", "+05:30")
    moment = datetime.fromisoformat(data["datetime"])
    assert abs(moment - datetime.now(UTC)) < timedelta(minutes=1)
    assert moment.utcoffset() == timedelta(hours=5, minutes=30)
    assert data["date"] == moment.date().isoformat()
    assert data["time"] == moment.strftime("%H:%M:%S")
    assert data["weekday"] == moment.strftime("%A")


async def test_clock_date_and_time_formats() -> None:
    date = json.loads((await clock({"timezone": "Asia/Shanghai", "format": "date"})).text)
    assert list(date) == ["timezone", "date", "weekday"]
    shanghai_today = datetime.now(ZoneInfo("Asia/Shanghai")).date()
    assert abs(datetime.fromisoformat(date["date"]).date() - shanghai_today) <= timedelta(days=1)
    time = json.loads((await clock({"timezone": "Asia/Shanghai", "format": "time"})).text)
    assert list(time) == ["timezone", "time", "utc_offset"]
    assert time["utc_offset"] == "+08:00" and len(time["time"]) == 8


async def test_clock_default_zone_and_aliases() -> None:
    hong_kong = json.loads((await clock({}, ToolDeps(default_timezone="Asia/Hong_Kong"))).text)
    assert (hong_kong["timezone"], hong_kong["utc_offset"]) == ("Asia/Hong_Kong", "+08:00")
    assert json.loads((await clock({})).text)["timezone"] == "UTC"
    for alias in ("utc", "UTC", "GMT", "gmt"):
        assert json.loads((await clock({"timezone": alias})).text)["timezone"] == "UTC"
    london = json.loads((await clock({"timezone": "europe/london"})).text)
    assert london["timezone"] == "Europe/London"


async def test_clock_bad_zone_names_the_fix() -> None:
    result = await clock({"timezone": "Mars/Base"})
    assert result == ToolResult(
        "get_current_datetime: unknown time zone 'Mars/Base'; use an IANA name such as 'UTC', "
        "'Europe/London', 'America/New_York', 'Asia/Shanghai', 'Asia/Hong_Kong'",
        ok=False,
    )
    assert not (await clock({"timezone": "../etc/passwd"})).ok


def test_builtin_registry() -> None:
    registry = builtin_registry()
    assert registry.names() == [
        "get_current_datetime",
        "get_exchange_rate",
        "web_search",
        "search_knowledge",
        "check_off_topic",
        "save_user_memory",
        "get_user_context",
        "collect_info",
        "create_payment",
        "fetch_news",
        "schedule_message",
        "list_schedules",
        "cancel_schedule",
        "transfer_to_human",
    ]
    assert registry.get("get_current_datetime") is get_current_datetime
    assert isinstance(get_current_datetime, Tool)
    assert registry is not builtin_registry()  # each caller may add its own tools


def test_persona_patterns_resolve_to_names_in_registry_order(registry: ToolRegistry) -> None:
    names = registry.resolve(["st*", "greet", "missing", "*_json", "gre?t", "[lw]*"])
    assert names == (
        "structured",
        "step",
        "greet",
        "missing",  # a plain name stays as written: calling it only returns an error
        "echo_json",
        "wait_forever",
        "long_text",
    )
    assert registry.resolve(("st*", "greet", "missing", "*_json", "gre?t", "[lw]*")) is names
