"""API keys: made at random, kept as SHA-256 hex, checked in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping

KEY_PREFIX = "gk_"


def new_key() -> str:
    """A fresh key: 256 random bits, URL-safe, with a prefix that secret scanners can match."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """What config.yaml keeps: the key's SHA-256 as lowercase hex.

    A plain hash is enough (no salt, no slow KDF): keys are 256 random bits, not passwords.
    """
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class KeyRing:
    """The configured keys, by hash; `owner` finds which key (by its id) a request presented."""

    def __init__(self, keys: Iterable[tuple[str, str]]) -> None:
        self._hashes: Mapping[str, str] = {key_id: digest for key_id, digest in keys}

    def __len__(self) -> int:
        return len(self._hashes)

    def owner(self, authorization: str | None) -> str | None:
        """The id of the key in an `Authorization: Bearer <key>` header, else None."""
        if authorization is None:
            return None
        scheme, _, key = authorization.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return None
        presented = hash_key(key.strip()).encode()
        found = None
        # Every configured hash is compared, each in constant time: the time taken says nothing
        # about which key, or how much of one, matched.
        for key_id, digest in self._hashes.items():
            if hmac.compare_digest(presented, digest.encode()):
                found = key_id
        return found
