"""The event loop `bot serve` runs on (`server.event_loop`).

`auto`, the default, is uvloop where it is installed (a dependency everywhere but Windows), else
asyncio's own loop. uvloop's loop is libuv's, in C: a turn through the openai SDK costs 6.7 %
fewer instructions of the gateway's (`bench/ws_bench.py --instructions --loop uvloop`: 4.85 M
instead of 5.20 M; scripted 2.79 M instead of 2.98 M) and ~12 % less CPU measured, since it also
makes fewer system calls. The code is the same on both: only public asyncio API, but for what
bot/runtime/listener.py reads with `hasattr`. `asyncio` is the way back should a platform's
uvloop misbehave.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from collections.abc import Callable
from typing import Literal

log = logging.getLogger(__name__)

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
