"""At start: end every turn a dead process left unfinished, so no placeholder stays on "Thinking…".

In embedded mode (one `bot serve` per database) a turn still `running` at start belongs to a
process that died (kill -9, power loss): its placeholder is edited into a short note asking the
user to send the message again, and the turn is marked failed. Its inbound events stay claimed,
so a platform's redelivery of the same message is not answered a second time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from adapters.base import Channel, ChannelError, OutboundContent
from bot.storage.base import GatewayStore
from bot.storage.turns import handle_from_record

log = logging.getLogger(__name__)

INTERRUPTED_BY_CRASH = "Sorry — I was interrupted before I could answer. Please send that again."
INTERRUPTED_ERROR = "interrupted: the gateway stopped mid-turn"
EDIT_DEADLINE_S = 15.0  # per placeholder: a platform that does not answer must not stall the start


async def recover_interrupted_turns(
    store: GatewayStore, channels: Mapping[str, Channel], *, close_orphans: bool = True
) -> int:
    """Edit and close every unfinished turn; how many were closed.

    `close_orphans=False` (`bot chat`, which runs no platform channel) leaves the turns of
    channels not running here to the next `bot serve`, which can still edit their placeholders.
    """
    closed = 0
    for turn in await store.unfinished_turns():
        if turn["channel"] not in channels and not close_orphans:
            continue
        record = turn["placeholder"]
        handle = handle_from_record(record) if record else None
        channel = channels.get(handle.chat.channel) if handle is not None else None
        outcome = "no placeholder to edit"
        if handle is not None and channel is not None:
            try:
                async with asyncio.timeout(EDIT_DEADLINE_S):
                    await channel.edit(handle, OutboundContent(INTERRUPTED_BY_CRASH), final=True)
                outcome = "placeholder edited"
            except (ChannelError, TimeoutError) as exc:
                outcome = f"placeholder edit failed: {exc}"
        elif handle is not None:
            outcome = f"channel {handle.chat.channel!r} is not running"
        await store.finish_turn(turn["id"], status="failed", error=INTERRUPTED_ERROR)
        log.warning("turn %s was interrupted by the last shutdown: %s", turn["id"], outcome)
        closed += 1
    return closed


async def close_taken_over_turn(
    store: GatewayStore, channels: Mapping[str, Channel], event_ids: list[str]
) -> bool:
    """Several processes: a batch taken over from a process that died running it. If that turn
    was recorded (its placeholder may be showing), end it as at a restart and say so; False
    when it never was (the process died before its placeholder), so the batch runs afresh."""
    wanted = set(event_ids)
    for turn in await store.unfinished_turns():
        if wanted & set(turn["inbound_event_ids"]):
            record = turn["placeholder"]
            handle = handle_from_record(record) if record else None
            channel = channels.get(handle.chat.channel) if handle is not None else None
            if handle is not None and channel is not None:
                try:
                    async with asyncio.timeout(EDIT_DEADLINE_S):
                        await channel.edit(
                            handle, OutboundContent(INTERRUPTED_BY_CRASH), final=True
                        )
                except (ChannelError, TimeoutError) as exc:
                    log.warning("turn %s: placeholder not edited: %s", turn["id"], exc)
            await store.finish_turn(turn["id"], status="failed", error=INTERRUPTED_ERROR)
            log.warning("turn %s: its process died mid-turn; closed by this one", turn["id"])
            return True
    return False
