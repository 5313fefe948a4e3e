"""A turn's status as a frame, for channels that show it themselves (the web socket's
`tool.*` and `agent.*`): what the delivery sends beside the placeholder's text."""

from __future__ import annotations

import logging

from adapters.base import ChannelError, ChatRef, EventSink
from agent.persona_file import display_name_of
from tools.events import AgentFinished, AgentStarted, ToolFinished, ToolStarted

log = logging.getLogger(__name__)


async def emit_status(
    channel: EventSink,
    chat: ChatRef,
    event: AgentStarted | AgentFinished | ToolStarted | ToolFinished,
    placeholder: str | None,
) -> None:
    """`placeholder`: the bubble whose work this is (a widget shows the line inside it)."""
    fields: dict[str, str]
    if isinstance(event, AgentStarted | AgentFinished):
        kind = "agent.started" if isinstance(event, AgentStarted) else "agent.finished"
        status = "running" if isinstance(event, AgentStarted) else event.status
        fields = {
            "task_id": event.task_id,
            "subagent_type": event.subagent_type,
            "display_name": shown_name(event),
            "description": event.shown_description,
            "status": status,
        }
    else:
        kind = "tool.started" if isinstance(event, ToolStarted) else "tool.finished"
        status = "running" if isinstance(event, ToolStarted) else "failed"
        if isinstance(event, ToolFinished) and event.ok:
            status = "completed"
        fields = {
            "call_id": event.call_id,
            "name": event.name,
            "label": event.label,
            "status": status,
        }
    if placeholder is not None:
        fields["message_id"] = placeholder
    try:
        await channel.emit_event(chat, kind, fields)
    except ChannelError as exc:
        log.info("could not show %s in %s: %s", kind, chat.key, exc)


def shown_name(event: AgentStarted | AgentFinished) -> str:
    """The specialist's name as users see it (an event made without one: from its file name)."""
    return event.display_name or display_name_of(event.subagent_type)
