"""The event loop `bot serve` runs on (`server.event_loop`).

`auto`, the default, is uvloop where it is installed (a dependency everywhere but Windows), else
asyncio's own loop. uvloop's loop is libuv's, in C: a turn through the openai SDK costs 6.7 %
fewer of the gateway's instructions (`bench/ws_bench.py --instructions --loop uvloop`: 4.85 M
instead of 5.20 M; scripted 2.79 M instead of 2.98 M). It makes as many system calls (strace),
and its CPU per turn, in alternating runs of `bench/ws_bench.py --provider openai`, was 1.56–1.66
ms against 1.80–1.87 ms (a 2-core machine whose runs vary by as much; the count is the figure).
The code is the same on both: only public asyncio API, but for what bot/runtime/listener.py
reads with `hasattr`. `asyncio` is the way back should a platform's uvloop misbehave; one
difference shows: past the open-file limit libuv drops a connection it cannot accept without a
word, where asyncio logs it (adapters/websocket/accept_errors.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable
from typing import Literal

EventLoopChoice = Literal["auto", "asyncio", "uvloop"]
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def loop_factory(choice: EventLoopChoice) -> LoopFactory | None:
    """What makes the loop for `choice`; None: asyncio's own. `uvloop` when it is not installed
    is an error the config check has already reported (`ServerConfig`)."""
    if choice == "asyncio" or (choice == "auto" and not uvloop_installed()):
        return None
    import uvloop

    factory: LoopFactory = uvloop.new_event_loop
    return factory


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """For the start's log line: `uvloop` or `asyncio`."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
