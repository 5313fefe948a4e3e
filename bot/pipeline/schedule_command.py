"""`/schedule`: the conversation's scheduled messages listed, and `/schedule cancel ID`.

Adding one is the model's tool (`schedule_message`): reading a time in words is its job. The
list and the cancel only ever reach this conversation's schedules.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.base import InboundMessage
from bot.pipeline.routing import Reply
from bot.schedules.desk import ScheduleDesk, view
from content.texts import t

PREVIEW_CHARS = 60


@dataclass(frozen=True, slots=True)
class ScheduleCommand:
    desk: ScheduleDesk
    name: str = "schedule"
    help: str = "schedule.help"

    async def run(self, message: InboundMessage, reply: Reply) -> None:
        words = message.text.split()[1:]
        language = message.language
        key = message.conversation_key
        if not words or words[0].lower() == "list":
            await reply(message, await self._listing(key, language))
        elif words[0].lower() == "cancel" and len(words) == 2:
            found = await self.desk.cancel_in(
                key, words[1], f"cancelled by {message.user_id} with /schedule"
            )
            answer = "schedule.cancelled" if found else "schedule.not_found"
            await reply(message, t(language, answer, id=words[1]))
        else:
            await reply(message, t(language, "schedule.usage"))

    async def _listing(self, key: str, language: str | None) -> str:
        rows = await self.desk.records.conversation_schedules(key)
        if not rows:
            return t(language, "schedule.none")
        lines = [t(language, "schedule.head")]
        for row in rows:
            shown = view(row)
            what = (
                row.body if len(row.body) <= PREVIEW_CHARS else row.body[: PREVIEW_CHARS - 1] + "…"
            )
            repeat = shown["when"] if shown["when"] != "once" else t(language, "schedule.once")
            lines.append(
                t(
                    language,
                    "schedule.line",
                    id=row.id,
                    next=shown["next"],
                    repeat=repeat,
                    what=what,
                )
            )
        return "\n".join(lines)
