"""Who runs a platform account: one holder per bot, so two gateways never fight over its updates.

Telegram hands a bot's updates to one poller (or one webhook): two processes given the same token
take turns being cut off ("409 Conflict: terminated by other getUpdates request") and each sees
half the messages. A channel holds its account while it runs; a second holder is refused with
`AccountTaken`, naming the first. Processes that share the work over Redis hold it together (the
same identity: same Redis prefix, same instance), and elect their one poller as before.

`FileAccounts` is the embedded implementation: a lock file per account in the data folder, which
the system releases when its process dies. `RedisAccounts` (bot/redis/accounts.py) spans hosts.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import socket
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Protocol


class AccountTaken(Exception):
    """Another holder runs this account; `holder` says who, as it described itself."""

    def __init__(self, account: str, holder: str, ours: str) -> None:
        super().__init__(
            f"{account} is already run by {holder}; this one ({ours}) stays off it. Give each "
            "gateway its own bot, or let the processes share it through one redis.url"
        )
        self.account = account
        self.holder = holder


def holder_label(instance: str) -> str:
    """How a holder describes itself to the one it refuses."""
    return f"instance {instance!r} (pid {os.getpid()} on {socket.gethostname()})"


class Accounts(Protocol):
    def hold(self, key: str, account: str, instance: str) -> AbstractAsyncContextManager[None]:
        """Hold account `key` (`account` names it for people) for the block, as channel
        `instance`; `AccountTaken` at entry if a holder that may not share it has it."""
        ...


class FileAccounts:
    """Lock files under `folder`: one process at a time per account (the embedded mode has no
    other process to share with). The lock dies with its process, however it dies."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def hold(self, key: str, account: str, instance: str) -> AbstractAsyncContextManager[None]:
        return self._hold(key, account, instance)

    @asynccontextmanager
    async def _hold(self, key: str, account: str, instance: str) -> AsyncIterator[None]:
        fd = await asyncio.to_thread(self._lock, key, account, holder_label(instance))
        try:
            yield
        finally:
            os.close(fd)  # closing the last descriptor releases the lock

    def _lock(self, key: str, account: str, label: str) -> int:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            theirs = path.read_text(encoding="utf-8", errors="replace").strip()
            os.close(fd)
            raise AccountTaken(account, theirs or "another process", label) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, label.encode())
        return fd
