"""Scheduled messages' parts built from config: the desk, `/schedule`, this process's runner.

Beside `wiring.py` (which holds the other parts) so that neither it nor the app outgrows its
idea: the app holds one `Scheduling` and asks it for the desk, the commands and the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from adapters.base import Channel, InboundMessage
from bot.pipeline.access import AccessRules
from bot.pipeline.conversation_state import ConversationState
from bot.pipeline.routing import Command
from bot.pipeline.schedule_command import ScheduleCommand
from bot.runtime.config import Config
from bot.schedules.desk import ScheduleDesk
from bot.schedules.runner import ScheduleRunner
from bot.storage.backends import AnyStore


def desk(config: Config, store: AnyStore, states: ConversationState) -> ScheduleDesk:
    """Where the schedule tools, `/schedule` and the admin add, list and cancel."""
    return ScheduleDesk(
        store,
        chats=store.conversation_chat,
        states=states,
        settings=config.schedules,
        default_timezone=config.agent.default_timezone,
    )


def commands(schedules: ScheduleDesk | None) -> list[Command]:
    """`/schedule`, where schedules are kept (not in `bot chat`)."""
    return [ScheduleCommand(schedules)] if schedules is not None else []


def runner(
    config: Config,
    store: AnyStore,
    channels: Mapping[str, Channel],
    inbox: Callable[[InboundMessage], Awaitable[None]],
    access: AccessRules,
) -> ScheduleRunner:
    """This process's share of firing due schedules: texts to `channels`, tasks to `inbox`
    (the gateway's), each only while `access` still admits its author there."""
    return ScheduleRunner(
        store,
        channels=channels,
        inbox=inbox,
        settings=config.schedules,
        language=config.gateway.language,
        admits=lambda message: access.check(message) == "allow",
    )


@dataclass(frozen=True, slots=True)
class Scheduling:
    """The app's scheduled messages: none in `bot chat` (it shares a serving bot's database,
    and its terminal is no channel a serving process could post to)."""

    desk: ScheduleDesk | None
    runner: ScheduleRunner | None

    @property
    def commands(self) -> list[Command]:
        return commands(self.desk)

    async def run(self, ready: asyncio.Event) -> None:
        """Fires due schedules once messages are taken (`ready`: interrupted turns are queued
        first, so a task fired now does not enter the gateway ahead of them)."""
        if self.runner is not None:
            await ready.wait()
            await self.runner.run()


def scheduling(
    config: Config,
    store: AnyStore,
    states: ConversationState,
    channels: Mapping[str, Channel],
    *,
    inbox: Callable[[InboundMessage], Awaitable[None]],
    access: AccessRules,
    serving: bool,
) -> Scheduling:
    if not serving:
        return Scheduling(None, None)
    return Scheduling(desk(config, store, states), runner(config, store, channels, inbox, access))
