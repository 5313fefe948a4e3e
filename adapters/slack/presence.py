"""The assistant-thread status line ("is thinking…", "is asking specialist-research…").

Where the app has Slack's AI-app surface, a DM thread shows a status under the conversation
(`assistant.threads.setStatus`). It is set when the placeholder goes out, follows the status
lines the delivery writes under the text (a tool, a specialist), and is cleared by the final.
It is a courtesy: inside a budget of its own where only the clearing waits, and whatever Slack answers
(a thread that is not an assistant thread, say) costs nothing but a debug line.
"""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import ChatRef
from adapters.budget import Busy
from adapters.slack.throttle import WorkspaceSlots
from adapters.telegram.recent import Recent

log = logging.getLogger(__name__)

REMEMBERED_THREADS = 4096
STATUS_MARKS = ("🔧 ", "⏳ ")  # the delivery's tool and specialist lines
STATUS_CHARS = 50
REFUSED = "\0"  # Slack refused a status here (not an assistant thread): not asked again


class AssistantStatus:
    def __init__(self, client: AsyncWebClient, slots: WorkspaceSlots) -> None:
        self._client = client
        self._slots = slots
        self._threads: Recent[tuple[str, str], str] = Recent(REMEMBERED_THREADS)  # -> status

    def mark(self, channel: str, thread_ts: str) -> None:
        """An assistant thread (Slack said `assistant_thread_started`, or it is a DM thread)."""
        if (channel, thread_ts) not in self._threads:
            self._threads.put((channel, thread_ts), "")

    async def follow(self, chat: ChatRef, markdown: str) -> None:
        """A preview went out: show its last status line, if it has one."""
        last = markdown.rstrip().rsplit("\n", 1)[-1]
        if last.startswith(STATUS_MARKS):
            await self.show(chat, "is " + last[2:].strip().rstrip("…").lower()[:STATUS_CHARS] + "…")

    async def show(self, chat: ChatRef, status: str) -> None:
        key = (chat.chat_id, chat.thread_id or "")
        shown = self._threads.get(key)
        if shown is None or shown in (status, REFUSED):
            return
        try:
            async with self._slots.status(chat, "preview" if status else "final"):
                await self._client.assistant_threads_setStatus(
                    channel_id=chat.chat_id, thread_ts=chat.thread_id or "", status=status
                )
            self._threads.put(key, status)
        except Busy:
            pass  # the next preview brings a newer status
        except SlackApiError as exc:
            self._threads.put(key, REFUSED)
            log.debug("assistant status in %s refused: %s", chat.key, exc)
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.debug("assistant status in %s not set: %s", chat.key, exc)
