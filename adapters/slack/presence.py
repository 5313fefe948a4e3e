"""The thread's status while the bot works: an agent session's, or an assistant thread's line.

An app declared an agent (`agent_view`) has agent sessions: each thread it answers in is one,
`processing` while a turn runs (Slack shows its loading state and a stop button, whose press
arrives as `agent_session_stopped`) and `active` once the final went out
(`agents.sessions.setStatus`). Where Slack refuses that (the app is no agent after all), or for
an app with the older AI-app surface (`assistant_view`), a DM thread shows a line of text under
the conversation (`assistant.threads.setStatus`): set when the placeholder goes out, following
the status lines the delivery writes under the text (a tool, a specialist), cleared by the
final. The two write the same place, so an agent's threads get only the session's status.
Both are a courtesy: inside a budget of their own where only the last one waits, and whatever
Slack answers costs nothing but a debug line.
"""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import ChatRef
from adapters.budget import Busy, Rank
from adapters.slack.throttle import WorkspaceSlots
from adapters.telegram.recent import Recent

log = logging.getLogger(__name__)

REMEMBERED_THREADS = 4096
STATUS_MARKS = ("🔧 ", "⏳ ")  # the delivery's tool and specialist lines
STATUS_CHARS = 50
REFUSED = "\0"  # Slack refused a status here (not an assistant thread): not asked again


class AssistantStatus:
    def __init__(self, client: AsyncWebClient, slots: WorkspaceSlots, agent: bool = False) -> None:
        self._client = client
        self._slots = slots
        self._threads: Recent[tuple[str, str], str] = Recent(REMEMBERED_THREADS)  # -> status
        self._agent = agent  # the app is an agent: its threads are agent sessions
        self._sessions: Recent[tuple[str, str], str] = Recent(REMEMBERED_THREADS)  # -> status

    def mark(self, channel: str, thread_ts: str) -> None:
        """An assistant thread (Slack said `assistant_thread_started`, or it is a DM thread)."""
        if (channel, thread_ts) not in self._threads:
            self._threads.put((channel, thread_ts), "")

    async def follow(self, chat: ChatRef, markdown: str) -> None:
        """A preview went out: show its last status line, if it has one."""
        if await self._session(chat, "processing"):
            return
        last = markdown.rstrip().rsplit("\n", 1)[-1]
        if last.startswith(STATUS_MARKS):
            await self.show(chat, "is " + last[2:].strip().rstrip("…").lower()[:STATUS_CHARS] + "…")

    async def show(self, chat: ChatRef, status: str) -> None:
        if await self._session(chat, "processing" if status else "active"):
            return
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

    async def _session(self, chat: ChatRef, status: str) -> bool:
        """The thread's agent session set to `status`; False where it is none (the caller
        then shows an assistant thread's line)."""
        if not self._agent or not chat.thread_id:
            return False
        key = (chat.chat_id, chat.thread_id)
        shown = self._sessions.get(key)
        if shown == REFUSED:
            return False
        if shown == status:
            return True
        try:
            rank: Rank = "preview" if status == "processing" else "final"
            async with self._slots.status(chat, rank, "agents.sessions.setStatus"):
                await self._client.agents_sessions_setStatus(
                    channel_id=chat.chat_id, thread_ts=chat.thread_id, status=status
                )
            self._sessions.put(key, status)
        except Busy:
            pass
        except SlackApiError as exc:
            self._sessions.put(key, REFUSED)
            log.debug("agent session status in %s refused: %s", chat.key, exc)
            return False
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.debug("agent session status in %s not set: %s", chat.key, exc)
        return True
