"""The log: `log.format: text | json`, the turn's ids on every JSON line, and no secret in any.

JSON lines carry `ts`, `level`, `logger`, `message`, the ids of the turn the line belongs to
(`conversation_key`, `turn_id`, `channel`, `persona`, `task_id`: agent/log_context.py) and
`exc` for a traceback. Every line, in either format and from any library, passes `Redact`:
the config's secrets (every field marked `secret()`), anything shaped like a token or an API
key, and the passwords in URLs become `[redacted]`, at every level.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TextIO
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel

from agent.log_context import current
from tools.redact import redact_credentials

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MASK = "[redacted]"
HANDLER_NAME = "bot"
# Each alternative starts with a character class and checks what precedes it by looking back
# after it (not `\b` or a look-behind first): the regex engine then skips at once every position
# that cannot start a match, ~4x faster on a log line (each line passes here, at every level).
_TOKENS = re.compile(
    r"[0-9](?<![0-9][0-9])[0-9]{5,11}:[A-Za-z0-9_-]{30,}"  # a Telegram bot token (also in /bot<token>/)
    r"|x(?<!\wx)ox[abposr]-[A-Za-z0-9-]{8,}|x(?<!\wx)app-[A-Za-z0-9-]{8,}"  # Slack tokens
    r"|[sr](?<!\w[sr])k-[A-Za-z0-9_\-]{12,}"  # OpenAI and Anthropic keys
)
_BEARER = re.compile(r"(?<=Bearer )[A-Za-z0-9._~+/-]{12,}=*")  # only where "Bearer " is


_SECRET_NAME = re.compile(r"(^|_)(key|token|secret|password)$", re.I)


def secret_env_values(env: Mapping[str, str]) -> Iterator[str]:
    """Secrets the gateway may read from the environment itself (`ANTHROPIC_API_KEY`, say)."""
    return (value for name, value in env.items() if _SECRET_NAME.search(name) and value)


class Redact(logging.Filter):
    """Rewrites each record's message (and traceback) with the secrets masked."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        # longest first, so a secret that contains another is masked whole
        self.secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def mask(self, text: str) -> str:
        for value in self.secrets:
            if value in text:
                text = text.replace(value, MASK)
        text = _TOKENS.sub(MASK, text)
        if "Bearer " in text:
            text = _BEARER.sub(MASK, text)
        return redact_credentials(text)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a call whose arguments do not fit: logged, never raised at the caller
            message = f"{record.msg} (arguments that do not fit: {record.args!r})"
            record.msg, record.args = message, None
        masked = self.mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.mask(record.exc_text)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(current())
        extra = getattr(record, "fields", None)  # a line's own facts (bot/ops/turn_log.py)
        if isinstance(extra, dict):
            entry.update(extra)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


# Libraries that log every request at INFO: one line per platform call drowns the turn lines
# (lark-oapi calls Feishu through httpx, and httpx writes "HTTP Request: POST …" at INFO; the
# model SDKs' httpx2 the same for every model call).
CHATTY_LOGGERS = ("httpx", "httpx2")


class DemoteInfo(logging.Filter):
    """A chatty library's INFO lines become DEBUG: shown only when the log level is DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


def setup_logging(
    level: str,
    fmt: Literal["text", "json"],
    *,
    secrets: Iterable[str] = (),
    file: Path | None = None,
    stream: TextIO | None = None,
) -> logging.Handler:
    """One handler on the root logger: to `file` (`bot chat`), else `stream` (stderr)."""
    handler: logging.Handler
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(Redact(secrets))
    _skip_unused_fields()
    handler.set_name(HANDLER_NAME)
    root = logging.getLogger()
    for old in root.handlers[:]:
        if old.get_name() == HANDLER_NAME:  # ours from an earlier call; others' stay
            root.removeHandler(old)
            old.close()
    root.addHandler(handler)
    root.setLevel(getattr(logging, level))
    for name in CHATTY_LOGGERS:
        chatty = logging.getLogger(name)
        if not any(isinstance(f, DemoteInfo) for f in chatty.filters):
            chatty.addFilter(DemoteInfo())
        # above DEBUG their INFO lines are not even made (a record, a filter: ~20 us a model
        # call); at DEBUG they are, and shown as DEBUG lines
        chatty.setLevel(logging.NOTSET if root.level <= logging.DEBUG else logging.WARNING)
    return handler


def _skip_unused_fields() -> None:
    """Neither format shows where a line was logged from, nor the thread or process: the
    logging HOWTO's "Optimization" switches, so a record is made without them (finding the
    caller walks the stack): ~15 % of what a line costs, ~10 us on the development machine."""
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


def secret_values(section: BaseModel) -> Iterator[str]:
    """The values of every field marked `secret()` or named like a secret (`api_key`,
    `*_token`, `*_secret`, `password`) in a config, its sections and lists."""
    for name, info in type(section).model_fields.items():
        value = getattr(section, name)
        extra = info.json_schema_extra
        marked = isinstance(extra, dict) and bool(extra.get("secret"))
        if (marked or _SECRET_NAME.search(name)) and isinstance(value, str) and value:
            yield from _secret_part(value)
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, BaseModel):
                yield from secret_values(item)


def _secret_part(value: str) -> Iterator[str]:
    """What to mask of a secret: a URL's password alone (`redis://host:6379/0` has none, and
    an operator needs to read which server it is), anything else whole."""
    if "://" not in value:
        yield value
        return
    try:
        password = urlsplit(value).password
    except ValueError:  # not a URL after all (a bad port, say)
        yield value
        return
    if password:
        yield password
        if unquote(password) != password:
            yield unquote(password)
