"""`/usage`: the user's own turns, tokens and cost today and this month (UTC), in the chat.

Cost is priced as `bot usage` prices it (bot/reports/usage.py): `usage.prices`, and each of
`llm.choices` by its `price`, per million tokens of the model each call recorded. A period with
a call to a model that has no price shows no total cost ("not priced"), never a wrong one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from adapters.base import InboundMessage
from bot.pipeline.routing import Reply
from bot.runtime.config.choices import ModelPrice
from bot.storage.base import StorageError
from bot.storage.user_usage import UserUsage, UserUsageRecords
from content.texts import t

log = logging.getLogger(__name__)


def cost_of(usage: UserUsage, prices: Mapping[str, ModelPrice]) -> float | None:
    """The tokens' cost; None when any model among them has no price."""
    total = 0.0
    for model, tokens_in, tokens_out in usage.tokens:
        price = prices.get(model)
        if price is None:
            return None
        total += tokens_in * price.input_per_mtok + tokens_out * price.output_per_mtok
    return total / 1_000_000


@dataclass(frozen=True, slots=True)
class UsageCommand:
    records: UserUsageRecords
    prices: Mapping[str, ModelPrice]
    clock: Callable[[], float] = field(default=time.time)
    name: str = "usage"
    help: str = "usage.help"

    async def run(self, message: InboundMessage, reply: Reply) -> None:
        language = message.language
        today = datetime.fromtimestamp(self.clock(), UTC).date()
        lines = [t(language, "usage.head")]
        try:
            for key, since in (("usage.today", today), ("usage.month", today.replace(day=1))):
                usage = await self.records.user_usage(
                    channel=message.chat.channel, user_id=message.user_id, since=since.isoformat()
                )
                lines.append(self._line(key, usage, language))
        except StorageError as exc:
            log.error("usage of a user in %s not read: %s", message.chat.key, exc)
            await reply(message, t(language, "usage.unavailable"))
            return
        await reply(message, "\n".join(lines))

    def _line(self, key: str, usage: UserUsage, language: str | None) -> str:
        tokens = sum(i + o for _, i, o in usage.tokens)
        cost = cost_of(usage, self.prices)
        shown = t(language, "usage.unpriced") if cost is None else f"${cost:.4f}"
        return t(language, key, turns=usage.turns, tokens=tokens, cost=shown)
