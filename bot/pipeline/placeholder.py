"""The first thing a turn shows: its placeholder, posted through rate limits and unknown fates.

A placeholder that cannot be posted ends the turn before any work, with the batch's events
reopened: nothing was shown, so a platform's redelivery may answer it.
"""

from __future__ import annotations

import asyncio
import logging

from adapters.base import ChannelError, DeliveryUncertain, InboundMessage, RateLimited
from bot.pipeline.dedup import Dedup
from bot.pipeline.delivery import Delivery

log = logging.getLogger(__name__)

PLACEHOLDER_ATTEMPTS = 3


async def post_placeholder(
    delivery: Delivery, batch: list[InboundMessage], dedup: Dedup, text: str | None = None
) -> bool:
    """Post it (`text`: what it says until the model's words come, else "Thinking…" in the
    delivery's language), waiting out rate limits;
    if it cannot be posted, let a redelivery try again.

    A send of unknown fate may be showing: no second placeholder then, and no previews (the
    delivery has nothing to edit); the final comes as one new message. Neither Telegram's
    polling nor its webhook would ever redeliver the message, so giving up would lose it.
    """
    for attempt in range(1, PLACEHOLDER_ATTEMPTS + 1):
        try:
            await delivery.start(text)
            return True
        except DeliveryUncertain as exc:
            log.warning("placeholder in %s unconfirmed (%s)", batch[-1].chat.key, exc)
            return True
        except RateLimited as exc:
            if attempt < PLACEHOLDER_ATTEMPTS:
                await asyncio.sleep(exc.retry_after)
        except ChannelError as exc:
            log.error("no placeholder in %s: %s", batch[-1].chat.key, exc)
            break
    for message in batch:
        await dedup.reopen(message.event_id)  # nothing was shown: a retry may answer
    return False
