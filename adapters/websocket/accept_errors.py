"""One log line per interval for "socket.accept() out of system resource", not a flood of them.

When the process runs out of file descriptors (EMFILE), asyncio's accept loop (3.11) logs a
traceback for every connection waiting in the backlog and schedules a retry for each, a second
later: thousands of tracebacks a second, and at shutdown the retries still pending fail on the
closed socket, each with another traceback. Written to a pipe or a journal, that log output alone
can block the process. This filter on the `asyncio` logger lets one line through per interval,
without the traceback, and counts the rest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

ACCEPT_ERROR: Final = "socket.accept() out of system resource"
_RETRY_ERROR: Final = "Exception in callback BaseSelectorEventLoop._start_serving"
INTERVAL_S: Final = 10.0


class AcceptErrorFilter(logging.Filter):
    def __init__(
        self, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._clock = clock
        self._last: float | None = None
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        if message.startswith(_RETRY_ERROR) and self._last is not None:
            self.suppressed += 1  # a retry an accept error scheduled, run on a closed socket
            return False
        if not message.startswith(ACCEPT_ERROR):
            return True
        now = self._clock()
        if self._last is not None and now - self._last < self.interval_s:
            self.suppressed += 1
            return False
        error = record.exc_info[1] if record.exc_info else None
        record.msg = "%s (%s); %d more in the last %.0f s not logged. Raise the open-file limit "
        record.msg += "(ulimit -n) or lower channels.websocket.max_connections"
        record.args = (ACCEPT_ERROR, error, self.suppressed, self.interval_s)
        record.exc_info = record.exc_text = None
        self._last, self.suppressed = now, 0
        return True


_installed: AcceptErrorFilter | None = None


def install() -> AcceptErrorFilter:
    """Put the filter on the `asyncio` logger once per process (every server shares that logger)."""
    global _installed
    if _installed is None:
        _installed = AcceptErrorFilter()
        logging.getLogger("asyncio").addFilter(_installed)
    return _installed
