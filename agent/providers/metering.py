"""Every model call measured: the one provider, or each provider of a chain, in a `MeteredProvider`.

Apart from metered.py because the chain (resilient.py) reports its retries and fallbacks to the
same `ModelObserver`: the chain imports the observer, this imports the chain.
"""

from __future__ import annotations

from agent.providers.base import Provider
from agent.providers.metered import MeteredProvider, ModelObserver
from agent.providers.resilient import ResilientProvider


def meter(provider: Provider, observer: ModelObserver) -> Provider:
    """`provider` with every call measured; a chain keeps its object, its members are wrapped."""
    if isinstance(provider, ResilientProvider):
        provider.chain = tuple(_wrap(p, observer) for p in provider.chain)
        provider.observer = observer
        return provider
    return _wrap(provider, observer)


def _wrap(provider: Provider, observer: ModelObserver) -> Provider:
    return (
        provider if isinstance(provider, MeteredProvider) else MeteredProvider(provider, observer)
    )
