"""The offline model: deterministic, no network, says plainly it is not an LLM, shows the mechanics.

It answers from simple rules so that `bot serve` with no keys shows the whole flow: a placeholder
edited live as text streams in, a tool call (`get_current_datetime` when asked the time), and a
specialist dispatch (`AgentTool`, when a message starts with `@<specialist>` and the tool exists).
"""

from __future__ import annotations

import asyncio
import json
import re

from agent.types import (
    Message,
    ModelRequest,
    ModelStream,
    Stop,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    Usage,
)

INTRO = (
    "I'm the built-in **offline demo model** — not an LLM, just a few fixed rules, so you can see "
    "the gateway work without an API key."
)
HINT = (
    "Try asking *what time is it?* to see a tool call, or *@specialist-planner what day is it?* "
    "to see a specialist dispatched. To talk to a real model, set "
    "`ANTHROPIC_API_KEY`, `OPENAI_API_KEY` or `OPENAI_BASE_URL` and restart."
)
FOOTNOTE = "\n\n_(Answered by the offline demo model from the tool's result.)_"
_TIME = re.compile(r"\b(time|clock|date|day is it|today|what day)\b", re.I)
_ZONE = re.compile(r"\b([A-Z][a-z]+(?:/[A-Z][A-Za-z_]+)+|UTC|GMT)\b")
_MENTION = re.compile(r"^@([a-z0-9][a-z0-9_-]*)\s+(.+)$", re.I | re.S)
_GREETING = re.compile(r"^\s*(hi|hello|hey|hallo|hola|bonjour|你好|こんにちは)\b", re.I)


class OfflineProvider:
    name = "offline"

    def __init__(self, *, model: str = "offline-rules", word_delay_s: float = 0.03) -> None:
        self.model = model
        self.word_delay_s = word_delay_s

    async def stream(self, request: ModelRequest) -> ModelStream:
        last = request.messages[-1] if request.messages else Message("user", "")
        tools = {spec.name for spec in request.tools}
        call = None if last.role == "tool" else _choose_call(last.content, tools)
        if call is not None:
            yield ToolCallEvent(call)
            yield Usage(_tokens(request), 8)
            yield Stop("tool_use")
            return
        answer = (
            _answer_tools(request.messages) if last.role == "tool" else _answer_text(last.content)
        )
        for word in re.findall(r"\S+\s*|\s+", answer):
            if self.word_delay_s:
                await asyncio.sleep(self.word_delay_s)
            yield TextDelta(word)
        yield Usage(_tokens(request), len(answer) // 4)
        yield Stop("end_turn")


def _choose_call(text: str, tools: set[str]) -> ToolCall | None:
    if text.startswith("<task-notification"):
        return None
    mention = _MENTION.match(text.strip())
    if mention and "AgentTool" in tools:
        name, task = mention.group(1), mention.group(2).strip()
        prompt = (
            f'A user asked the coordinator: "{task}". Work on this with your tools and reply with '
            "a short, factual answer the coordinator can pass on."
        )
        args = {"description": task[:60], "subagent_type": name, "prompt": prompt}
        return ToolCall(
            id=f"offline_{abs(hash(text)) % 10**8}", name="AgentTool", arguments=json.dumps(args)
        )
    if _TIME.search(text) and "get_current_datetime" in tools:
        zone = _ZONE.search(text)
        args = {"timezone": zone.group(1)} if zone else {}
        return ToolCall(
            id=f"offline_{abs(hash(text)) % 10**8}",
            name="get_current_datetime",
            arguments=json.dumps(args),
        )
    return None


def _answer_text(text: str) -> str:
    if text.startswith("<task-notification"):
        body = text.split(">", 1)[1].split("</task-notification>", 1)[0].strip()
        return f"A background task finished.\n\n{body}"
    said = text.strip().replace("\n", " ")
    if len(said) > 200:
        said = said[:200] + "…"
    if _GREETING.match(said):
        return f"Hello! {INTRO}\n\n{HINT}"
    return f"{INTRO} You said: “{said}”.\n\n{HINT}"


def _answer_tools(messages: tuple[Message, ...]) -> str:
    results: list[Message] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.append(message)
    lines = [_describe(result) for result in reversed(results)]
    return "\n\n".join(lines) + FOOTNOTE


def _describe(result: Message) -> str:
    if result.is_error:
        return f"The tool `{result.name}` reported a problem: {result.content}"
    if result.name == "AgentTool":
        try:
            data = json.loads(result.content)
        except ValueError:
            data = {}
        if "result" in data:
            report = str(data["result"]).replace(FOOTNOTE, "").strip()
            return f"**{data.get('subagent_type')}** reports:\n\n{report}"
    if result.name == "get_current_datetime":
        try:
            data = json.loads(result.content)
        except ValueError:
            data = {}
        if "datetime" in data:
            return (
                f"It is **{data.get('time')}** on {data.get('weekday')}, {data.get('date')} "
                f"in {data.get('timezone')} (UTC{data.get('utc_offset')})."
            )
    return f"The tool `{result.name}` returned:\n\n{result.content}"


def _tokens(request: ModelRequest) -> int:
    return (len(request.system) + sum(len(m.content) for m in request.messages)) // 4
