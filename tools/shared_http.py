"""The app's one HTTP session for tools: opened inside the running loop, closed with the app.

aiohttp wants its session made inside the event loop, while the app's parts are built before the
loop runs; this holder is built with them and handed to the tools' deps, so nothing is patched in
later. A tool run outside the app (tests, scripts) finds it closed and opens a session of its own.
"""

from __future__ import annotations

import aiohttp


class SharedSession:
    """One `aiohttp.ClientSession` shared by every tool call between `open` and `close`."""

    def __init__(self, timeout_s: float = 60.0) -> None:
        # tools keep their own shorter deadlines; this one only bounds a forgotten request
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    @property
    def current(self) -> aiohttp.ClientSession | None:
        """The open session; None before `open`, after `close`, or once it was closed."""
        session = self._session
        return session if session is not None and not session.closed else None

    async def open(self) -> None:
        if self.current is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
