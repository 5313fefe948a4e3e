"""PostgreSQL faults: which errors are the database's (StorageError), which link faults clear."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

import asyncpg

# errors of the caller's data or of our SQL: the database itself is fine
NOT_FAULTS: tuple[type[Exception], ...] = (
    asyncpg.IntegrityConstraintViolationError,
    asyncpg.DataError,
    asyncpg.exceptions.SyntaxOrAccessError,
)
# the link to the server, not the server's data: any call that succeeds shows it is back
LINK_FAULTS: tuple[type[Exception], ...] = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up, cancelled
)
FAULTS: tuple[type[Exception], ...] = (
    asyncpg.PostgresError,  # the server's: disk full, shutting down, too many connections ...
    asyncpg.InterfaceError,  # the link's: "connection is closed"
    OSError,  # refused, reset, unreachable
    TimeoutError,
)


def redacted(url: str) -> str:
    """The url without its password (in the user part or `?password=`), for messages and logs."""
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username}:***@{host}")
    query = re.sub(r"(^|&)password=[^&]*", r"\1password=***", parts.query)
    return urlunsplit(parts._replace(query=query))


def is_fault(exc: BaseException) -> bool:
    """A fault of the database or the link to it, not of the caller's data or our SQL."""
    if isinstance(exc, asyncpg.InsufficientPrivilegeError):
        return True  # the database's grants, not our SQL
    return isinstance(exc, FAULTS) and not isinstance(exc, NOT_FAULTS)


def describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return f"{type(exc).__name__}: {exc}"
