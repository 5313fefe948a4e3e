"""Inbound rate limits: how many messages a user may send a minute, counted across processes."""

from adapters.rates.base import InboundRates, burst
from adapters.rates.local import LocalInboundRates, RateLimiter

__all__ = ["InboundRates", "LocalInboundRates", "RateLimiter", "burst"]
