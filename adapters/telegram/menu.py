"""The command menu Telegram shows in each language of ours (`setMyCommands`)."""

from __future__ import annotations

from collections.abc import Sequence

from aiogram.types import BotCommand

from content.texts import t

MENU = ("new", "stop", "help", "usage")  # the gateway commands every chat has
# each command's line in the menu: the catalogue key of its help (content/locales/)
MENU_TEXTS = {
    "human": "handoff.human_help",
    "schedule": "schedule.help",
    "model": "model.help",
    "persona": "persona.help",
}


def commands(language: str, more: Sequence[str] = ()) -> list[BotCommand]:
    """The command menu in `language` (one of content/texts.py's): every chat's commands, then
    `more` that this deployment offers (those with a text: MENU_TEXTS)."""
    return [
        BotCommand(
            command=name,
            description=t(language, MENU_TEXTS.get(name, f"command.menu_{name}"))[:256],
        )
        for name in (*MENU, *(name for name in more if name in MENU_TEXTS))
    ]
