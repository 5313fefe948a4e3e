"""Every Bot API call, counted for the operator: an aiogram request middleware on the session.

It sits below our own code, so polling (`getUpdates`), start-up (`getMe`, `setWebhook`) and
every send and edit are counted alike, with the method name aiogram sends (a fixed set).
"""

from __future__ import annotations

from typing import Any

from aiogram import Bot
from aiogram.client.session.middlewares.base import (
    BaseRequestMiddleware,
    NextRequestMiddlewareType,
)
from aiogram.exceptions import TelegramRetryAfter
from aiogram.methods import TelegramMethod
from aiogram.methods.base import Response

from adapters.platform_calls import PlatformCalls


class CountedCalls(BaseRequestMiddleware):
    def __init__(self, calls: PlatformCalls) -> None:
        self.calls = calls

    async def __call__(
        self,
        make_request: NextRequestMiddlewareType[Any],
        bot: Bot,
        method: TelegramMethod[Any],
    ) -> Response[Any]:
        name = method.__api_method__
        try:
            response = await make_request(bot, method)
        except TelegramRetryAfter as exc:
            self.calls.record("telegram", name, "rate_limited", float(exc.retry_after))
            raise
        except BaseException:
            self.calls.record("telegram", name, "error")
            raise
        self.calls.record("telegram", name, "ok")
        return response
