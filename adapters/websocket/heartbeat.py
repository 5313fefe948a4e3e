"""The pings of an endpoint's sockets: one timer for all, each socket at an interval of its own.

A ping finds out whether a socket's client is still there (a tab whose network went away never
closes its socket) and keeps proxies from closing an idle one. A socket that sent nothing since
its last ping, not even the pong, when its next one is due is closed (1001, "no pong").

Why not aiohttp's `heartbeat`: when its timer fires it checks that the loop's clock has reached
the ping's time and sets the timer again if not, and uvloop's timers fire up to 0.5 ms early
(rounded to its millisecond clock), so each ping re-fired ~40 times in a spin until the clock
ticked over: 5,000 idle sockets cost the loop 107-115 ms of CPU a second (~0.6 ms a turn of a
paced load beside them, bench/many_bench.py). Nor rounded up to whole seconds, as it is by
default: every socket that opened within a second then pinged in one pass of the loop (1,000-
2,000 pings, 48-80 ms, after a deploy's reconnects). Here a socket draws its interval once
(between HEARTBEAT_SPREAD and 1 times `heartbeat_s`), so sockets that opened together drift
apart, and the sockets due are pinged at the next tick (every TICK_S): a tick's pings go in one
pass (5,000 sockets at 20 s: ~28 a tick), which wakes the loop once for all of them where a
timer each woke it for each ping and again for each timer's own bookkeeping.
"""

from __future__ import annotations

import asyncio
import random
from typing import Final

from adapters.websocket.connection import Connection

HEARTBEAT_SPREAD: Final = 0.8  # a socket pings every 0.8-1.0 x heartbeat_s
TICK_S: Final = 0.1
CLOSE_NO_PONG: Final = 1001  # going away: the client reconnects if it is there after all


class Heartbeat:
    """Pings every socket added every ~`interval_s`, until it is discarded or found gone."""

    def __init__(self, interval_s: float) -> None:
        self._interval_ticks = interval_s / TICK_S
        self._due: dict[int, set[Connection]] = {}  # tick → the sockets to ping at it
        self._tick = 0
        self._timer: asyncio.TimerHandle | None = None  # only while a socket is in

    def add(self, conn: Connection) -> None:
        conn.beat = max(1, round(self._interval_ticks * random.uniform(HEARTBEAT_SPREAD, 1.0)))
        self._at(conn, self._tick + conn.beat)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(TICK_S, self._on_tick)

    def discard(self, conn: Connection) -> None:
        due = self._due.get(conn.due)
        if due is not None:
            due.discard(conn)
            if not due:
                del self._due[conn.due]

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._due.clear()

    def _at(self, conn: Connection, tick: int) -> None:
        conn.due = tick
        self._due.setdefault(tick, set()).add(conn)

    def _on_tick(self) -> None:
        self._tick += 1
        for conn in self._due.pop(self._tick, ()):
            if not conn.answered:
                conn.close(CLOSE_NO_PONG, "no pong")
            elif conn.ping():
                conn.answered = False
                self._at(conn, self._tick + conn.beat)
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(TICK_S, self._on_tick) if self._due else None
