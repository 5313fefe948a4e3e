"""Build the web socket channel from `channels.websocket`."""

from __future__ import annotations

from adapters.registry import ChannelServices
from adapters.uploads import UploadSigner
from adapters.websocket.channel import WebSocketChannel
from adapters.websocket.config import WebsocketConfig


def build(section: WebsocketConfig, services: ChannelServices) -> WebSocketChannel:
    return WebSocketChannel(
        path=section.path,
        allowed_origins=section.allowed_origins,
        max_frame_bytes=section.max_frame_bytes,
        heartbeat_s=section.heartbeat_s,
        rate_limit_per_minute=section.rate_limit_per_minute,
        max_text_chars=section.max_text_chars,
        identity_secret=section.identity_secret,
        replay_events=section.replay_events,
        hub=services.event_hub,
        public_url=services.public_url,
        hello_timeout_s=section.hello_timeout_s,
        max_connections=section.max_connections,
        max_connections_per_address=section.max_connections_per_address,
        client_address_header=section.client_address_header,
        history=services.history,
        claims=services.claims,
        gateway_claims=services.gateway_claims,
        rates=services.inbound_rates,
        blobs=services.blobs,
        links=services.blob_links,
        uploads=UploadSigner(services.upload_secret),
        introduction=services.introduction,
    )
