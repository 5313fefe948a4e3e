"""Buttons on Telegram: a display hint's buttons as an inline keyboard, a press as an `Action`.

A button's press comes back as a `callback_query` carrying only `callback_data` (1-64 bytes),
so the button's action id and value ride in it (`<action_id>|<value>`); a button whose pair is
longer is left out (logged) rather than sent and refused. Telegram drops a message's keyboard
when an edit carries none: a live message's buttons go with the next edit of the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from aiogram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from adapters.base import Action, ChatRef, InboundMessage

log = logging.getLogger(__name__)

MAX_DATA: Final = 64  # bytes of callback_data Telegram takes
SEPARATOR: Final = "|"


def keyboard(display: Sequence[Mapping[str, Any]]) -> InlineKeyboardMarkup | None:
    """One row of buttons per display hint that has any; None when none has."""
    rows: list[list[InlineKeyboardButton]] = []
    for hint in display:
        row = []
        for spec in hint.get("buttons") or ():
            data = f"{spec.get('action_id', '')}{SEPARATOR}{spec.get('value', '')}"
            if len(data.encode()) > MAX_DATA or not spec.get("action_id"):
                log.warning("button %r left out: its callback data is over 64 bytes", spec)
                continue
            row.append(InlineKeyboardButton(text=str(spec.get("label", "")), callback_data=data))
        if row:
            rows.append(row)
    return InlineKeyboardMarkup(inline_keyboard=rows) if rows else None


def pressed(query: CallbackQuery, update_id: int, channel: str) -> InboundMessage | None:
    """A press of one of our buttons, as an action on the conversation of its message; None
    for a press we cannot place (an inline message's, or data that is not ours)."""
    message = query.message
    if message is None or not query.data or SEPARATOR not in query.data:
        return None
    action_id, _, value = query.data.partition(SEPARATOR)
    thread = getattr(message, "message_thread_id", None)
    topic = bool(getattr(message, "is_topic_message", False))
    chat = ChatRef(channel, str(message.chat.id), str(thread) if topic and thread else None)
    label = _label(message, query.data)
    return InboundMessage(
        chat=chat,
        user_id=str(query.from_user.id),
        text="",
        event_id=f"{channel}:{update_id}",
        message_id=str(message.message_id),
        user_name=query.from_user.username or query.from_user.full_name,
        is_group=message.chat.type != "private",
        mentioned=True,  # a press of our own button is addressed to us
        action=Action(action_id, value or None, label, str(message.message_id)),
        language=query.from_user.language_code,
    )


def _label(message: Any, data: str) -> str | None:
    """What the pressed button said, from the message's keyboard (Telegram sends no label)."""
    markup = getattr(message, "reply_markup", None)
    for row in getattr(markup, "inline_keyboard", None) or ():
        for button in row:
            if button.callback_data == data:
                return str(button.text)
    return None
