"""Messages a `/stop` dropped from the queue: each one's stream ends with `message.dropped`.

The gateway's stop drops the conversation's queued messages and says only how many; their
streams would wait until `stream_timeout_s`, and a resend (same `client_message_id`) would never
be answered, its event id being claimed. So the API works out which of the session's messages
the stop dropped, from its records: a turn answers (and its placeholder `reply_to` names) the
last message of its batch, so user messages recorded after the newest one a bot message replies
to have not reached a turn. Those unanswered both before the stop and after it were dropped:
each is recorded `dropped` (a resend is told the same at once) and gets a `message.dropped`
event on the session, which every process's streams see through the event hub.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Final

from adapters.api.base import SessionsChannel, hub_key
from adapters.api.records import ApiMessage, SessionRecords
from adapters.base import ChatRef, InboundMessage

log = logging.getLogger(__name__)

RECENT: Final = 250  # more than a conversation's queue holds (gateway.max_queued, 100)
REASON: Final = "stopped"


async def waiting(records: SessionRecords, session_id: str) -> list[ApiMessage]:
    """The session's user messages no turn has begun to answer, oldest first."""
    recent = await records.api_messages(session_id, limit=RECENT)
    # A stop is answered by the turn it stops, or by a note replying to it: neither is a turn.
    users = {m.message_id: m for m in recent if m.role == "user" and _command(m) != "stop"}
    answered = 0  # the position up to which every user message has reached a turn
    for message in recent:
        if message.role != "assistant":
            continue
        replied = users.get(message.reply_to or "")
        if replied is not None:
            answered = max(answered, replied.position)
        elif len(recent) >= RECENT:  # perhaps a reply to a message older than the page
            answered = max(answered, message.position)
    return [m for m in users.values() if m.position > answered and m.status == "received"]


async def before_stop(records: SessionRecords, session_id: str) -> list[ApiMessage]:
    """`waiting` just before a stop; nothing if the records fail (the stop goes on regardless)."""
    try:
        return await waiting(records, session_id)
    except Exception:
        log.exception("api session %s: reading the messages a stop may drop", session_id)
        return []


async def announce(channel: SessionsChannel, session_id: str, before: list[ApiMessage]) -> None:
    """After a stop: those of `before` (from `before_stop`) that still wait were dropped."""
    if not before:
        return
    try:
        still = {m.message_id for m in await waiting(channel.records, session_id)}
        for message in before:
            if message.message_id not in still:
                continue  # answered meanwhile, or coalesced into the turn the stop ended
            await channel.records.add_api_message(replace(message, status="dropped"))
            fields = {"message_id": message.message_id, "reason": REASON}
            await channel.hub.publish(hub_key(session_id), "message.dropped", fields)
    except Exception:  # the stop itself worked; these streams then end at stream_timeout_s
        log.exception("api session %s: telling dropped messages failed", session_id)


def _command(message: ApiMessage) -> str | None:
    return InboundMessage(ChatRef("api", message.session_id), "", message.text, "").command


def event(message: ApiMessage, seq: int) -> dict[str, Any]:
    """The `message.dropped` event of `message`, for a resend when the hub no longer keeps it."""
    return {
        "type": "message.dropped",
        "message_id": message.message_id,
        "reason": REASON,
        "seq": seq,
    }
