"""What the gateway asks of a handoff to a person (bot/handoff/relay.py is the one there is).

Four edges, so the gateway itself knows nothing of operators: a message from the operators'
place is theirs (`operates`, `operate`); a message a held conversation took is also theirs to
see (`held`); a turn's batch is checked against the mode first (`before_turn`) and a request
the model made is switched to after the final (`after_turn`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from adapters.base import InboundMessage
from bot.pipeline.routing import Reply

Hold = Callable[[InboundMessage, str], Awaitable[None]]


class HandoffSeam(Protocol):
    def operates(self, message: InboundMessage) -> bool: ...

    async def operate(self, message: InboundMessage, reply: Reply) -> None: ...

    async def held(self, message: InboundMessage) -> None: ...

    async def before_turn(
        self, batch: list[InboundMessage], hold: Hold
    ) -> list[InboundMessage]: ...

    async def after_turn(self, batch: Sequence[InboundMessage]) -> None: ...
