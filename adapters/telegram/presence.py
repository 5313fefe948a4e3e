"""The "typing…" status while a turn works but shows nothing new; never while edits stream.

Telegram shows the status for about 5 s, or until the bot's next message. While previews change
the placeholder every interval the status says nothing more, and each one would take a slot from
the chat's budget; so it is sent only after a quiet spell (a slow model, a long tool call).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from adapters.base import ChannelError, ChatRef, RateLimited

log = logging.getLogger(__name__)

EVERY_S = 4.5  # the status lasts about 5 s
QUIET_INTERVALS = 2  # edit intervals with nothing new shown before the status goes out
GIVE_UP_S = 600.0  # a turn whose final never lands must not type forever


class TypingStatus:
    def __init__(
        self,
        send: Callable[[ChatRef], Awaitable[None]],
        interval_for: Callable[[ChatRef], float],
    ) -> None:
        self._send = send  # one sendChatAction within the chat's budget; RateLimited when busy
        self._interval_for = interval_for
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._shown_at: dict[str, float] = {}  # chat key -> when its text last changed

    def shown(self, chat: ChatRef) -> None:
        self._shown_at[chat.key] = asyncio.get_running_loop().time()

    def start(self, chat: ChatRef, group: asyncio.TaskGroup | None) -> None:
        if group is not None and chat.key not in self._tasks:
            self._tasks[chat.key] = group.create_task(self._keep(chat))

    def stop(self, chat: ChatRef) -> None:
        self._shown_at.pop(chat.key, None)
        task = self._tasks.pop(chat.key, None)
        if task is not None:
            task.cancel()

    async def _keep(self, chat: ChatRef) -> None:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + GIVE_UP_S
        quiet_s = QUIET_INTERVALS * self._interval_for(chat)
        due = loop.time() + quiet_s
        try:
            while due < give_up:
                await asyncio.sleep(due - loop.time())
                shown = self._shown_at.get(chat.key, 0.0)
                if loop.time() - shown < quiet_s:
                    due = shown + quiet_s
                    continue
                try:
                    await self._send(chat)
                    due = loop.time() + EVERY_S
                except RateLimited as exc:
                    due = loop.time() + exc.retry_after
        except ChannelError as exc:
            log.debug("typing in %s stopped: %s", chat.key, exc)
        except Exception:
            # "typing…" is a courtesy: a bug here must not take down the ingress TaskGroup
            log.exception("typing in %s crashed", chat.key)
        finally:
            if self._tasks.get(chat.key) is asyncio.current_task():
                del self._tasks[chat.key]
