"""Why a connection or a call failed, in one line a person (or the model) can act on.

The SDK fails in several shapes: `MCPError` (a JSON-RPC error, `Connection closed`, its own
read timeout), an `ExceptionGroup` out of the transport's task group (an HTTP server that went
away), `OSError` for a child that cannot start, httpx2's errors. Secrets never show: header
values are not part of any of these messages, and URLs lose their `user:password@`.
"""

from __future__ import annotations

from tools.redact import redact_credentials


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe_error(exc: BaseException) -> str:
    leaf = _leaf(exc)
    if isinstance(leaf, TimeoutError):
        return "no answer within the deadline (connect_timeout_s or call_timeout_s)"
    text = str(leaf).strip() or type(leaf).__name__
    name = type(leaf).__name__
    if name in ("ConnectError", "ConnectTimeout"):
        text = f"cannot connect: {text}"
    elif name == "HTTPStatusError":
        text = f"the server answered {text}"
    return redact_credentials(text if len(text) <= 300 else text[:299] + "…")
