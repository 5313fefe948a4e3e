"""aiogram's errors as the channel errors `Delivery` understands, and two of our own.

A refusal (HTTP 400) is read from its description, Telegram's only signal: "message is not
modified" is a success (`NotModified`), a parse failure is retried as plain text (`ParseError`),
a message that cannot be edited is `MessageGone`. No usable answer at all is `DeliveryUncertain`
for a send that may have landed: it is never sent again.
"""

from __future__ import annotations

from aiogram.exceptions import ClientDecodeError, TelegramBadRequest, TelegramNetworkError
from aiohttp import ClientConnectorError

from adapters.base import ChannelError, DeliveryUncertain, MessageGone


class NotModified(ChannelError):
    """Telegram already shows exactly this text: the edit succeeded."""


class ParseError(ChannelError):
    """Telegram could not parse our HTML."""


def lost(exc: Exception, sending: bool) -> ChannelError:
    """No usable answer: the network failed, or the body was not Telegram's JSON (a proxy's
    HTML error page, say). A send that may have reached Telegram is `DeliveryUncertain`."""
    if isinstance(exc, TelegramNetworkError):
        what = f"no answer from Telegram ({exc.message})"
    elif isinstance(exc, ClientDecodeError | UnicodeDecodeError):
        what = "an answer that is not Telegram's JSON (a proxy's error page?)"
    else:
        what = f"no answer from Telegram ({type(exc).__name__}: {exc})"
    never_sent = isinstance(exc.__cause__, ClientConnectorError)  # no connection was made
    if sending and not never_sent:
        return DeliveryUncertain(f"{what}; the message may have been posted, so it is not resent")
    return ChannelError(what)


def bad_request(exc: TelegramBadRequest) -> ChannelError:
    """A 400 by its description: Telegram gives these refusals no codes of their own."""
    reason = exc.message.lower()
    if "message is not modified" in reason:
        return NotModified(exc.message)
    if "can't parse entities" in reason or "can't find end tag" in reason:
        return ParseError(exc.message)
    if "message to edit not found" in reason or "message can't be edited" in reason:
        return MessageGone(exc.message)
    return ChannelError(f"Telegram refused the request: {exc.message}")
