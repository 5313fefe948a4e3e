"""What the offline model writes: its introduction, and answers made from tool results.

Users read these, so they name a specialist by its display name and never quote the dispatch
prompt: a specialist run by the offline model answers its task, not the wrapper around it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.types import Message

INTRO = (
    "I'm the built-in **offline demo model** — not an LLM, just a few fixed rules, so you can see "
    "the gateway work without an API key."
)
REAL_MODEL = (
    "To talk to a real model, set `ANTHROPIC_API_KEY`, `OPENAI_API_KEY` or `OPENAI_BASE_URL` "
    "and restart."
)
FOOTNOTE = "\n\n_(Answered by the offline demo model from the tool's result.)_"
# The offline coordinator's dispatch prompt; a specialist on the offline model reads the task back.
DISPATCH = (
    'A user asked the coordinator: "{task}". Work on this with your tools and reply with '
    "a short, factual answer the coordinator can pass on."
)
_DISPATCHED = re.compile(r'^A user asked the coordinator: "(.*)"\. Work on this', re.S)
_GREETING = re.compile(r"^\s*(hi|hello|hey|hallo|hola|bonjour|你好|こんにちは)\b", re.I)
# a catalog line (agent/catalog.py): `- specialist-costs ("Costs"): Works out fees…`
_CATALOG = re.compile(r'^- ([\w-]+) \("([^"\n]+)"\):', re.M)


def task_of(text: str) -> str:
    """The user's task inside the offline coordinator's dispatch prompt, else `text`."""
    dispatched = _DISPATCHED.match(text)
    return dispatched.group(1) if dispatched else text


def specialists(system: str) -> dict[str, set[str]]:
    """Each specialist in the system prompt's catalog, with the handles `@…` may name it by."""
    found: dict[str, set[str]] = {}
    for slug, shown in _CATALOG.findall(system):
        short = re.sub(r"^specialist[-_]", "", slug)
        found[slug] = {slug.lower(), short.lower(), shown.lower().replace(" ", "-")}
    return found


def _hint(tools: set[str], system: str) -> str:
    tries = []
    if "get_current_datetime" in tools:
        tries.append("*what time is it?* for a tool call")
    if "search_knowledge" in tools:
        tries.append("a question (*what does it cost?*) for a knowledge search")
    if "create_payment" in tools:
        tries.append("*I want to pay* for a payment card with a link")
    names = sorted(_CATALOG.findall(system), key=lambda pair: pair[0])
    if names and "AgentTool" in tools:
        slug, shown = names[0]
        handle = shown.lower().replace(" ", "-")
        tries.append(f"*@{handle} <a task>* to see the specialist {shown} dispatched")
    said = "Try " + ", ".join(tries) + ". " if tries else ""
    return said + REAL_MODEL


def answer_text(text: str, tools: set[str], system: str) -> str:
    if text.startswith("<task-notification"):
        body = text.split(">", 1)[1].split("</task-notification>", 1)[0].strip()
        return f"A background task finished.\n\n{body}"
    if _DISPATCHED.match(text):  # a specialist with no tool for it: says so, not the wrapper
        return (
            f"I worked on “{_short(task_of(text))}”, but as the offline demo model I can only use my "
            "tools, and none of them fits this task."
        )
    said = _short(text)
    if _GREETING.match(said):
        return f"Hello! {INTRO}\n\n{_hint(tools, system)}"
    return f"{INTRO} You said: “{said}”.\n\n{_hint(tools, system)}"


def _short(text: str) -> str:
    said = text.strip().replace("\n", " ")
    return said[:200] + "…" if len(said) > 200 else said


def answer_tools(messages: tuple[Message, ...]) -> str:
    results: list[Message] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.append(message)
    lines = [_describe(result) for result in reversed(results)]
    return "\n\n".join(lines) + FOOTNOTE


def _data(result: Message) -> dict[str, Any]:
    try:
        data = json.loads(result.content)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _describe(result: Message) -> str:
    if result.is_error:
        return f"The tool `{result.name}` reported a problem: {result.content}"
    data = _data(result)
    if result.name == "AgentTool" and "result" in data:
        report = str(data["result"]).replace(FOOTNOTE, "").strip()
        return f"**{data.get('display_name') or 'The specialist'}** reports:\n\n{report}"
    if result.name == "get_current_datetime" and "datetime" in data:
        return (
            f"It is **{data.get('time')}** on {data.get('weekday')}, {data.get('date')} "
            f"in {data.get('timezone')} (UTC{data.get('utc_offset')})."
        )
    if result.name == "search_knowledge" and "passages" in data:
        return _passages(data)
    if result.name == "create_payment" and data.get("order_id"):
        link = data.get("payment_url")
        pay = f"Pay it here: {link}" if link else "Online payment is not set up here."
        return (
            f"I made payment order **{data['order_id']}** for {float(data.get('amount') or 0):.2f} "
            f"{data.get('currency')}; it waits for payment (nothing is charged in this demo). "
            f"{pay}"
        )
    return f"The tool `{result.name}` returned:\n\n{result.content}"


def _passages(data: dict[str, Any]) -> str:
    """The best passage as written (its tables and lists render), the others by title."""
    passages = [p for p in data.get("passages", []) if isinstance(p, dict)][:3]
    if not passages:
        return str(data.get("message") or "Nothing in the knowledge base matches.")

    def where(passage: dict[str, Any]) -> str:
        return " · ".join(str(passage[k]) for k in ("title", "section") if passage.get(k))

    best = str(passages[0].get("text", "")).strip()
    best = best[:800] + "…" if len(best) > 800 else best
    also = ", ".join(f"*{where(p)}*" for p in passages[1:])
    return f"From the knowledge base, **{where(passages[0])}**:\n\n{best}" + (
        f"\n\nAlso relevant: {also}." if also else ""
    )
