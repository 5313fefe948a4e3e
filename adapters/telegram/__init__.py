"""The Telegram channel (aiogram 3): long polling or webhook, streamed edits inside a chat budget."""

from adapters.telegram.channel import TelegramChannel

__all__ = ["TelegramChannel"]
