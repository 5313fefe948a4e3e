"""Memory tools: `save_user_memory`, `get_user_context`, and the `collect_info` intake form.

The user is always the caller (`ctx.user_id`): none of these tools takes a user id, and an
extra argument is refused by validation, so a model cannot read or write another user's data.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from tools.base import ToolContext, ToolError
from tools.memory import MemoryType, context_for, remember, user_rows
from tools.registry import Tool, tool
from tools.settings import IntakeField, IntakeSettings

INTAKE_IMPORTANCE = 80
_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}


@tool(idempotent=True, destructive=False, open_world=False)  # the same sentence updates its row
async def save_user_memory(
    ctx: ToolContext, memory_type: MemoryType, content: str, category: str | None = None
) -> dict[str, Any]:
    """Remember something about this user for later conversations, on any channel.

    Args:
        memory_type: FACT for what the user states about themselves (age, job ...),
            PREFERENCE for what they like or prefer, INTENT for what they plan to do.
        content: one short, self-contained sentence, e.g. 'Has 10 years of experience in banking'.
        category: an optional topic label, e.g. a product or programme name.
    """
    if not content.strip():
        raise ToolError("content is empty; write the fact to remember as one sentence")
    memory_id = await remember(ctx, memory_type, content, category=category)
    return {"success": True, "memory_id": memory_id, "message": "Saved; I will remember this."}


@tool(read_only=True, open_world=False)
async def get_user_context(ctx: ToolContext, query: str) -> dict[str, Any]:
    """Recall what is known about this user: memories relevant to the question, then the most
    important ones.

    Args:
        query: the current question or topic, to find the relevant memories.
    """
    memories = context_for(await user_rows(ctx), query)
    message = f"{len(memories)} things known about this user" if memories else "nothing known yet"
    return {"success": True, "memories": memories, "message": message}


def _describe(name: str, field: IntakeField) -> str:
    need = "needed" if field.required else "optional"
    return f"{field.description or name.replace('_', ' ')} ({need})"


def intake_tool(settings: IntakeSettings | None = None) -> Tool:
    """`collect_info` with one optional argument per configured intake field."""
    fields: Mapping[str, IntakeField] = (settings or IntakeSettings()).fields

    async def collect_info(ctx: ToolContext, **values: Any) -> dict[str, Any]:
        category = values.pop("category", None)
        given = {k: v for k, v in values.items() if v is not None and v != ""}
        for name, value in given.items():
            text = f"{name.replace('_', ' ')}: {value}"
            await remember(
                ctx,
                "FACT",
                text,
                category=category,
                importance=INTAKE_IMPORTANCE,
                key=f"intake:{name}",
            )
        known = {row.key.removeprefix("intake:") for row in await user_rows(ctx) if row.key}
        missing = [n for n, f in fields.items() if f.required and n not in known]
        message = (
            f"Recorded {', '.join(given) or 'nothing new'}. Still missing: {', '.join(missing)}."
            if missing
            else f"Recorded {', '.join(given) or 'nothing new'}. All required information is in."
        )
        return {"success": True, "collected": given, "missing": missing, "message": message}

    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"ctx": ToolContext}
    docs = []
    for name, field in {
        **fields,
        "category": IntakeField(description="topic the user asks about"),
    }.items():
        if not name.isidentifier():
            raise ValueError(f"intake field {name!r} must be a plain name like years_of_experience")
        kind = _TYPES[field.type] | None
        params.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind)
        )
        annotations[name] = kind
        docs.append(
            f"    {name}: {_describe(name, field) if name != 'category' else field.description}"
        )
    collect_info.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    collect_info.__annotations__ = annotations
    collect_info.__doc__ = (
        "Record the user's details for an assessment (only what they told you) and see what is "
        "still missing.\n\nArgs:\n" + "\n".join(docs)
    )
    # keyed: a value again replaces itself
    return tool(idempotent=True, destructive=False, open_world=False)(collect_info)
