"""Event hubs: the frames of a conversation numbered, kept for replay and fanned out."""

from adapters.hub.base import EventHub, Subscriber
from adapters.hub.local import MemoryEventHub

__all__ = ["EventHub", "MemoryEventHub", "Subscriber"]
