"""The `transfer_to_human` tool: the model asks for a person on the team to take over.

The switch itself is the gateway's (bot/handoff/): the request is kept with the conversation
and acted on once this turn's final reply is out, so the reply and the switch never race, and
the user's notice comes last. Only personas that list the tool may call it.
"""

from __future__ import annotations

from tools.base import ToolContext, ToolError
from tools.registry import tool


@tool(
    destructive=False, idempotent=True, open_world=False, status="Asking a colleague to take over"
)
async def transfer_to_human(ctx: ToolContext, reason: str, summary: str) -> str:
    """Hand this conversation to a person on the team, when the user asks for one or when it
    needs someone who can act beyond your tools. A person then answers in this chat; you stay
    silent until they hand it back.

    Args:
        reason: why a person is needed, in a few words (shown to the operators).
        summary: what the user wants and what was tried so far, in two or three sentences,
            so the person does not have to ask again.
    """
    desk = ctx.deps.handoff
    if desk is None:
        raise ToolError("no person can take over in this deployment; keep helping the user")
    if not reason.strip():
        raise ToolError("give a reason: why a person is needed, in a few words")
    return await desk.transfer(ctx, reason.strip()[:300], summary.strip()[:2000])
