"""Event hubs: the frames of a conversation numbered, kept for replay and fanned out."""

from adapters.hub.base import Attached, EventHub, Subscriber
from adapters.hub.local import MemoryEventHub

__all__ = ["Attached", "EventHub", "MemoryEventHub", "Subscriber"]
