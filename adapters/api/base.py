"""What the sessions API's request handlers need of its channel, and the names both sides use.

The channel (channel.py) installs the handlers (handlers.py, streams.py, dropped.py); they
reach it only through `SessionsChannel`, so neither side imports the other both ways.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from adapters.api.keys import KeyRing
from adapters.api.records import SessionRecords
from adapters.api.slots import StreamSlots
from adapters.api.sse import SseSubscriber
from adapters.base import InboundMessage
from adapters.hub import EventHub
from adapters.rates import InboundRates
from adapters.uploads import UploadSigner
from content.blobs import BlobStore
from content.parts import Part

PREFIX: Final = "/api/v1"


@dataclass(frozen=True, slots=True)
class ApiSettings:
    rate_limit_per_minute: int = 30
    max_text_chars: int = 8000
    stream_timeout_s: float = 300
    keepalive_s: float = 15
    max_streams_per_key: int = 20  # open answer and event streams of a key (adapters/api/slots.py)
    max_streams: int = 200  # and of all keys together, on this process


def hub_key(session_id: str) -> str:
    """The session's conversation in the event hub (apart from the web socket's `v:`/`u:`)."""
    return f"api:{session_id}"


class SessionsChannel(Protocol):
    """The channel's parts a request uses: its records, its hub, its limits, the way in."""

    @property
    def name(self) -> str: ...

    keys: KeyRing
    settings: ApiSettings
    records: SessionRecords
    hub: EventHub
    rates: InboundRates
    streams: set[SseSubscriber]  # open event streams, ended at shutdown
    slots: StreamSlots  # how many may be open, per key and in all
    blobs: BlobStore | None  # None: no files (uploads refused, parts described)
    uploads: UploadSigner

    async def deliver(self, message: InboundMessage) -> None:
        """To the gateway; a request that came before the app started `run` waits for it."""
        ...

    def attachments(self, parts: Sequence[Part]) -> list[dict[str, Any]]:
        """Parts with signed links made now, as events and the history show them."""
        ...
