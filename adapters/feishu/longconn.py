"""The long connection: lark-oapi's `ws.Client` on a thread and event loop of its own.

The client blocks (`start()` runs its loop forever), fetches its endpoint with `requests`, and
drives a loop captured in a module global at import time (`lark_oapi.ws.client.loop`), so it gets
a daemon thread with a fresh loop put in that global. It acks an event only when our handler
returns, so the handler hands the payload to the gateway's loop
(`run_coroutine_threadsafe`) and returns as soon as a task of ours has it. Stopping stops that loop from outside and
closes the socket; the thread is a daemon, so even a stuck client never holds the process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from adapters.base import ChannelError
from adapters.feishu.normalize import MESSAGE
from adapters.feishu.sdk import (
    JSON,
    EventDispatcherHandler,
    LogLevel,
    connected,
    disconnect,
    stop_reconnecting,
    use_loop,
    ws_client,
)

log = logging.getLogger(__name__)

Feed = Callable[[dict[str, Any]], Coroutine[Any, Any, bool]]  # True: the event was taken
JOIN_S = 5.0
HANDOFF_S = 2.0  # for our loop to take an event: the platform waits 3 s for the ack


class LongConnection:
    def __init__(self, *, app_id: str, app_secret: str, base_url: str) -> None:
        self._app_id = app_id
        self._app_secret = app_secret
        self._base_url = base_url
        self._ws_loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._running = False

    @property
    def connected(self) -> bool:
        """Whether the client's web socket is open now (read when asked: one attribute of the
        client, which its thread sets; nothing polls it)."""
        client = self._client
        return self._running and client is not None and connected(client)

    async def run(self, feed: Feed) -> None:
        """Receive events until cancelled; a client that cannot connect is a `ChannelError`."""
        main = asyncio.get_running_loop()
        ended: asyncio.Future[None] = main.create_future()

        def handle(data: Any) -> None:
            # On the client's thread: hand over and return, so the ack goes out at once. An
            # event our loop did not take (the channel stopping) raises: the SDK then answers
            # 500 instead of acking it, and Feishu delivers it again rather than it being lost.
            payload = json.loads(JSON.marshal(data))
            taken = asyncio.run_coroutine_threadsafe(feed(payload), main).result(HANDOFF_S)
            if not taken:
                raise ChannelError("Feishu event not taken: the channel is stopping")

        def finish(error: BaseException | None) -> None:
            if ended.done():
                return
            if error is None:
                ended.set_result(None)
            else:
                ended.set_exception(error)

        thread = threading.Thread(
            target=self._thread,
            args=(handle, main, finish),
            name="feishu-long-connection",
            daemon=True,
        )
        self._client, self._running = None, True  # not a previous run's client
        thread.start()
        try:
            await ended
        finally:
            self._running = False
            self._stop()
            await asyncio.to_thread(thread.join, JOIN_S)

    def _thread(
        self,
        handle: Callable[[Any], None],
        main: asyncio.AbstractEventLoop,
        finish: Callable[[BaseException | None], None],
    ) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        use_loop(loop)  # the SDK drives the loop in its module global (sdk.py)
        self._ws_loop = loop
        events = (
            EventDispatcherHandler.builder("", "")
            .register_p2_customized_event(MESSAGE, handle)
            .register_p2_card_action_trigger(handle)
            .build()
        )
        client = ws_client.Client(
            self._app_id,
            self._app_secret,
            event_handler=events,
            domain=self._base_url,
            auto_reconnect=True,
            log_level=LogLevel.WARNING,
        )
        self._client = client
        error: BaseException | None = None
        try:
            client.start()
        except RuntimeError as exc:
            if "stopped" not in str(exc):  # "Event loop stopped before Future completed": ours
                error = ChannelError(f"Feishu long connection failed: {exc}")
        except Exception as exc:
            error = ChannelError(f"Feishu long connection failed: {type(exc).__name__}: {exc}")
        finally:
            self._close(loop, client)
            main.call_soon_threadsafe(finish, error)

    def _stop(self) -> None:
        if self._client is not None:
            stop_reconnecting(self._client)
        loop = self._ws_loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:
                pass  # closed in between

    @staticmethod
    def _close(loop: asyncio.AbstractEventLoop, client: Any) -> None:
        try:
            stop_reconnecting(client)
            # The receive loop first: closing the socket under it would log an error.
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(disconnect(client))
        except Exception:
            log.debug("closing the Feishu long connection", exc_info=True)
        finally:
            loop.close()
