"""The Telegram channel (aiogram 3): long polling or webhook; answers stream as live drafts in
private chats and as edits in groups, inside a chat budget."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.telegram import sdk

sdk.install()  # aiogram, whoever imports it first, with its types built when first used

if TYPE_CHECKING:
    from adapters.telegram.channel import TelegramChannel

__all__ = ["TelegramChannel"]


def __getattr__(name: str) -> Any:
    # Lazy: aiogram takes seconds to import, and `adapters.telegram.config` must not pay for it.
    if name == "TelegramChannel":
        from adapters.telegram.channel import TelegramChannel

        return TelegramChannel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
