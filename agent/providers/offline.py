"""The offline model: deterministic, no network, says plainly it is not an LLM, shows the mechanics.

It answers from simple rules so that `bot serve` with no keys shows the whole flow, with each
tool its persona offers: a placeholder edited live as text streams in, the time
(`get_current_datetime`), a knowledge search (`search_knowledge`, for a question), a payment card
and link (`create_payment`, when asked to pay; a refused argument is corrected from the tool's
error, as a model would), and a specialist dispatch (`AgentTool`, for `@<specialist> <task>`, the
specialist named by its display name or file name). What users read never holds the dispatch
prompt or a specialist's internal name (offline_answers).
"""

from __future__ import annotations

import asyncio
import json
import re

from agent.providers.offline_answers import (
    DISPATCH,
    answer_text,
    answer_tools,
    specialists,
    task_of,
)
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

_TIME = re.compile(r"\b(time|clock|date|day is it|today|what day)\b", re.I)
_ZONE = re.compile(r"\b([A-Z][a-z]+(?:/[A-Z][A-Za-z_]+)+|UTC|GMT)\b")
_MENTION = re.compile(r"^@([\w-]+)\s+(.+)$", re.S)
_PAY = re.compile(r"\b(pay|payment|buy|checkout|order)\b", re.I)
_QUESTION = re.compile(
    r"\?\s*$|^\s*(what|how|who|when|where|which|why|can|could|do|does|is|are|tell me)\b", re.I
)
_CHOICES = re.compile(
    r"unknown (service|category|payment method)\b[^;]*; choose one of \[([^\]]*)\]"
)
_PAY_ARGS = ("service", "category", "method")


class OfflineProvider:
    name = "offline"

    def __init__(self, *, model: str = "offline-rules", word_delay_s: float = 0.03) -> None:
        self.model = model
        self.word_delay_s = word_delay_s

    async def stream(self, request: ModelRequest) -> ModelStream:
        last = request.messages[-1] if request.messages else Message("user", "")
        tools = {spec.name for spec in request.tools}
        if last.role == "tool":
            call = _retry(request.messages)
        else:
            call = _choose_call(last.content, tools, request.system)
        if call is not None:
            yield ToolCallEvent(call)
            yield Usage(_tokens(request), 8)
            yield Stop("tool_use")
            return
        if last.role == "tool":
            answer = answer_tools(request.messages)
        else:
            answer = answer_text(last.content, tools, request.system)
        for word in re.findall(r"\S+\s*|\s+", answer):
            if self.word_delay_s:
                await asyncio.sleep(self.word_delay_s)
            yield TextDelta(word)
        yield Usage(_tokens(request), len(answer) // 4)
        yield Stop("end_turn")


def _call(name: str, args: dict[str, str], seed: str) -> ToolCall:
    return ToolCall(
        id=f"offline_{abs(hash((seed, name, str(args)))) % 10**8}",
        name=name,
        arguments=json.dumps(args),
    )


def _choose_call(text: str, tools: set[str], system: str) -> ToolCall | None:
    if text.startswith("<task-notification"):
        return None
    text = task_of(text)  # a specialist reads its task, not the dispatch wrapper around it
    mention = _MENTION.match(text.strip())
    if mention and "AgentTool" in tools:
        wanted, task = mention.group(1).lower(), mention.group(2).strip()
        known = specialists(system)
        name = next((slug for slug, handles in known.items() if wanted in handles), wanted)
        args = {
            "description": task[:60],
            "subagent_type": name,
            "prompt": DISPATCH.format(task=task),
        }
        return _call("AgentTool", args, text)
    if _TIME.search(text) and "get_current_datetime" in tools:
        zone = _ZONE.search(text)
        return _call("get_current_datetime", {"timezone": zone.group(1)} if zone else {}, text)
    if _PAY.search(text) and "create_payment" in tools:
        # the words in capitals are its choices ("pay for the TALENT ASSESSMENT by CARD");
        # what is missing the tool's error names, and the retry picks from it
        words = re.findall(r"\b[A-Z][A-Z_]{2,}\b", text)
        args = {name: words[i] if i < len(words) else "" for i, name in enumerate(_PAY_ARGS)}
        return _call("create_payment", args, text)
    if _QUESTION.search(text) and "search_knowledge" in tools:
        return _call("search_knowledge", {"query": text.strip()[:200]}, text)
    return None


def _retry(messages: tuple[Message, ...]) -> ToolCall | None:
    """A payment refused for one argument ("choose one of [...]"): the same call, corrected."""
    result = messages[-1]
    if result.name != "create_payment" or not result.is_error or len(messages) < 2:
        return None
    choice = _CHOICES.search(result.content)
    asked = next(
        (
            call
            for message in reversed(messages)
            for call in message.tool_calls
            if call.id == result.tool_call_id
        ),
        None,
    )
    if choice is None or asked is None:
        return None
    args = json.loads(asked.arguments)
    options = [o.strip().strip("'\"") for o in choice.group(2).split(",") if o.strip()]
    key = choice.group(1).removeprefix("payment ")
    if key not in args or not options or args[key] in options:
        return None
    said = next((m.content for m in reversed(messages) if m.role == "user"), "").upper()
    args[key] = next((o for o in options if re.search(rf"\b{re.escape(o)}\b", said)), options[0])
    return _call("create_payment", args, asked.id)


def _tokens(request: ModelRequest) -> int:
    return (len(request.system) + sum(len(m.content) for m in request.messages)) // 4
