"""The web socket channel and its embeddable widget; the protocol: docs/websocket-protocol.md."""

from adapters.websocket.channel import WebSocketChannel
from adapters.websocket.protocol import user_hash

__all__ = ["WebSocketChannel", "user_hash"]
