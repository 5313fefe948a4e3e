"""aiogram imported with its types built when first used (adapters/telegram/sdk.py): each type
still validates and serialises wherever it is first used. In a child process: a fresh import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.processes import ROOT

pytestmark = pytest.mark.process

CHILD = """
import json
import adapters.telegram.factory  # as the gateway imports the channel
from aiogram.methods import SendMessage
from aiogram.methods.base import Response
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup, Message, Update

built_at_import = [Update.__pydantic_complete__, Message.__pydantic_complete__]
markup = InlineKeyboardMarkup(inline_keyboard=[[InlineKeyboardButton(text="a", callback_data="b")]])
request = SendMessage(chat_id=1, text="x", reply_markup=markup).model_dump(exclude_none=True)
chat, user = {"id": 1, "type": "private"}, {"id": 2, "is_bot": False, "first_name": "Ada"}
message = {"message_id": 1, "date": 0, "chat": chat, "text": "hi", "from": user}
answer = Response[Message].model_validate({"ok": True, "result": message})
update = Update.model_validate({"update_id": 7, "message": message})
print(json.dumps({
    "built_at_import": built_at_import,
    "markup": request["reply_markup"],
    "sender": answer.result.from_user.first_name,
    "text": update.message.text,
}))
"""


def test_aiogram_types_build_where_first_used() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["built_at_import"] == [True, False]  # a poll's Update at once, the rest when used
    assert seen["markup"] == {"inline_keyboard": [[{"text": "a", "callback_data": "b"}]]}
    assert (seen["sender"], seen["text"]) == ("Ada", "hi")
