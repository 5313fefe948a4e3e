"""Build the sessions API channel from `channels.api`."""

from __future__ import annotations

from adapters.api.base import ApiSettings
from adapters.api.channel import ApiChannel
from adapters.api.config import ApiConfig
from adapters.api.keys import KeyRing
from adapters.registry import ChannelServices
from adapters.uploads import UploadSigner


def build(section: ApiConfig, services: ChannelServices) -> ApiChannel:
    return ApiChannel(
        keys=KeyRing((key.id, key.sha256) for key in section.keys),
        settings=ApiSettings(
            rate_limit_per_minute=section.rate_limit_per_minute,
            max_text_chars=section.max_text_chars,
            stream_timeout_s=section.stream_timeout_s,
            keepalive_s=section.keepalive_s,
            max_streams_per_key=section.max_streams_per_key,
            max_streams=section.max_streams,
        ),
        records=services.session_records,
        hub=services.event_hub,
        replay_events=section.replay_events,
        rates=services.inbound_rates,
        blobs=services.blobs,
        links=services.blob_links,
        uploads=UploadSigner(services.upload_secret),
        public_url=services.public_url,
    )
