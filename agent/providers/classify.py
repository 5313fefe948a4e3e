"""Sort a vendor's failure into our error tree: retry it, fail over, or tell the admin what to fix.

Both vendor modules pull (HTTP status, error type, code, message, headers) out of their SDK's
exception and call `classify`; the rules, the user-facing wording and the redaction of keys live
here once.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from agent.providers.base import (
    ProviderError,
    ProviderRejected,
    ProviderUnavailable,
    ToolsUnsupported,
)
from tools.redact import redact_credentials

KEY_REFUSED = "the AI model rejected the bot's API key (the bot's admin needs to fix the key)."
OUT_OF_CREDIT = (
    "the AI model's account is out of credit or over its spending limit "
    "(the bot's admin should check billing)."
)

# OpenAI `insufficient_quota` (a 429 that must not be retried), Anthropic "credit balance is too
# low" and "reached your specified API usage limits" (400), DeepSeek 402 "Insufficient Balance".
_QUOTA = re.compile(
    r"insufficient[_ ](quota|balance|funds)|credit balance|billing|spend(ing)?[_ ](limit|cap)"
    r"|usage limits?|exceeded your current quota|payment required",
    re.IGNORECASE,
)
# A refusal of the `tools` parameter, in a 400/404/422/501: Ollama "does not support tools", vLLM
# "tool choice requires --enable-auto-tool-choice", "function calling is not supported" ... Whole
# words only: "'required' is required" in a schema error is not "requires".
_TOOLS_WORD = re.compile(
    r"\btools?\b|\btool[ _]choice\b|\bfunction[ _]?call(s|ing)?\b|\bfunctions?\b", re.IGNORECASE
)
_UNSUPPORTED = re.compile(
    r"\b(un|not )?supported\b|\bsupports?\b|\brequires?\b|\benabl(e|ed|es|ing)\b|--jinja\b"
    r"|\bunrecogni[sz]ed\b|\bnot allowed\b|\bunknown (param(eter)?|field|argument)s?\b",
    re.IGNORECASE,
)
_REFUSAL_STATUSES = frozenset({400, 404, 422, 501})
# A 500 is usually transient ("function call parsing requires valid JSON" is a model glitch), but
# llama.cpp refuses tools with one: only its own words count there.
_SERVER_REFUSAL = re.compile(
    r"\btools param requires --jinja\b|\bunsupported param: tools\b", re.IGNORECASE
)
_REJECTED_KINDS = frozenset(
    {"invalid_request_error", "authentication_error", "permission_error", "not_found_error",
     "billing_error", "invalid_api_key", "request_too_large"}
)  # fmt: skip
_KEYLIKE = re.compile(r"\b(sk|rk|key)-[A-Za-z0-9_\-*.]{6,}")


def classify(
    *,
    who: str,
    key_hint: str,
    status: int | None,
    kind: str | None,
    code: str | None,
    message: str,
    headers: Mapping[str, str] | None = None,
    had_tools: bool = False,
    api_key: str = "",
) -> ProviderError:
    """The error for one failed call. `status` None: an error event inside a 200 stream.

    `who` names the provider, model and server for the log; `key_hint` names where the key comes
    from (e.g. "ANTHROPIC_API_KEY or llm.api_key"). The key itself never reaches a message.
    """
    message = redact(message, api_key)
    text = " ".join(part for part in (kind, code, message) if part)
    shown = f"HTTP {status}" if status else "error event in the stream"
    detail = f"{shown} {kind or code or ''}: {message}".replace(" :", ":")
    if status == 402 or _QUOTA.search(text):
        return ProviderRejected(
            f"{who}: {detail} — the account is out of credit or over its spending limit;"
            " check billing, or add a provider to llm.fallback",
            user_message=OUT_OF_CREDIT,
            user_key="provider.out_of_credit",
        )
    if status == 401 or kind == "authentication_error" or code == "invalid_api_key":
        return ProviderRejected(
            f"{who}: the API key was refused ({detail}); set a valid {key_hint}",
            user_message=KEY_REFUSED,
            user_key="provider.key_refused",
        )
    if status == 403 or kind == "permission_error":
        return ProviderRejected(
            f"{who}: not allowed ({detail}); check that {key_hint} may use this model"
        )
    if had_tools and refuses_tools(status, message):
        return ToolsUnsupported(
            f"{who}: the server refuses native tool calling ({detail}); "
            "set llm.tool_mode to text or auto, or enable tool calling on the server"
        )
    if status == 404 or kind == "not_found_error":
        return ProviderRejected(f"{who}: not found ({detail}); check llm.model and llm.base_url")
    retryable = status in (408, 409, 425, 429) or (status or 0) >= 500
    if retryable or (status is None and kind not in _REJECTED_KINDS):
        return ProviderUnavailable(f"{who}: {detail}", retry_after=retry_after(headers or {}))
    return ProviderRejected(f"{who}: the request was refused ({detail})")


def refuses_tools(status: int | None, message: str) -> bool:
    """The server clearly refused the `tools` parameter (and will refuse it every time).

    An error event inside a 200 stream (status None) is no refusal: the server took the request.
    """
    if status == 500:
        return bool(_SERVER_REFUSAL.search(message))
    return (
        status in _REFUSAL_STATUSES
        and bool(_TOOLS_WORD.search(message))
        and bool(_UNSUPPORTED.search(message))
    )


# what reading a stream event's JSON (or fields of the wrong type in it) raises
MALFORMED = (ValueError, TypeError, AttributeError)


def malformed(who: str, exc: Exception) -> ProviderUnavailable:
    """A stream event that is not JSON, or not the JSON the API sends (a proxy or a cut
    connection broke it, or a compatible server got it wrong): retry."""
    text = redact_credentials(f"{type(exc).__name__}: {exc}")
    return ProviderUnavailable(f"{who}: the server sent a stream event it could not read ({text})")


def connection_failure(exc: BaseException) -> str | None:
    """What went wrong reaching the server, read from the causes the SDK wraps (the OpenAI
    SDK's aiohttp transport calls a refused connection a `ConnectTimeout`): None when it was
    a real timeout, which the caller words with its deadlines."""
    found: str | None = None
    for cause in _causes(exc):
        if isinstance(cause, ConnectionRefusedError):
            found = "connection refused (nothing listens there: is the server up, the port right?)"
        elif isinstance(cause, socket.gaierror):
            found = f"DNS: the host name does not resolve ({cause.strerror}); check the url"
        elif isinstance(cause, ssl.SSLCertVerificationError):
            found = f"TLS: the certificate is not trusted ({cause.verify_message})"
        elif isinstance(cause, ssl.SSLError):  # aiohttp's wrapper is one too, without `reason`
            found = f"TLS: the handshake failed ({getattr(cause, 'reason', None) or cause})"
        elif isinstance(cause, ConnectionResetError):
            found = "the connection was reset by the server or a proxy"
        elif isinstance(cause, TimeoutError):
            return found
        elif isinstance(cause, OSError) and cause.errno is not None and found is None:
            found = f"connection failed: {cause.strerror or cause}"
    return found


def timed_out_connecting(exc: BaseException) -> bool | None:
    """True: no connection in time; False: the connection went quiet; None: cannot tell."""
    names = {type(cause).__name__ for cause in _causes(exc)}
    if names & {"ConnectTimeout", "ConnectionTimeoutError", "PoolTimeout"}:
        return True
    if names & {"ReadTimeout", "WriteTimeout", "SocketTimeoutError", "ServerTimeoutError"}:
        return False
    return None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, what it was raised from, and so on; an aiohttp connector error's OS error too."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        os_error = getattr(current, "os_error", None)
        if isinstance(os_error, BaseException):
            yield os_error
        current = current.__cause__ or current.__context__


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asks us to wait: `retry-after-ms`, or `retry-after` (seconds or date)."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after-ms" in lower:
            return max(0.0, float(lower["retry-after-ms"]) / 1000)
        value = lower.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = parsedate_to_datetime(value)
            return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def redact(text: str, api_key: str = "") -> str:
    """`text` without the key (some servers echo it, masked or not), nor a URL's password."""
    if api_key and len(api_key) >= 4:
        text = text.replace(api_key, "[key]")
    return redact_credentials(_KEYLIKE.sub("[key]", text))
