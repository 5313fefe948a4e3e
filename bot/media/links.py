"""Signed, expiring links to blobs: `/media/<blob id>?exp=<unix s>&sig=<hmac>` (and `name`).

The signature is an HMAC-SHA256 over the blob id, the expiry and the download name, so a link
opens one blob, under one name, until its time; changing any of them breaks it. The secret is
`media.url_secret` or, when that is empty, a random one made once in a file in `media.dir`
(mode 0600), so processes sharing the folder sign and check alike. Hosts that do not share the
folder must be given the same `media.url_secret`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

ROUTE = "/media/{blob_id}"
SECRET_FILE = ".url-secret"


class HmacBlobLinks:
    """Makes and checks the links (the channels' `BlobLinks`, adapters/base.py, once they take
    them); `ttl_s` is how long a new link works (`media.url_ttl_s`)."""

    def __init__(
        self, secret: bytes, *, ttl_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._secret = secret
        self.ttl_s = ttl_s
        self._clock = clock

    def link(self, blob_id: str, name: str | None = None) -> str:
        """The path (with its query) that serves the blob until `ttl_s` from now."""
        expires = str(int(self._clock() + self.ttl_s))
        query = {"exp": expires, "sig": self._sign(blob_id, expires, name or "")}
        if name:
            query["name"] = name
        return f"/media/{blob_id}?{urlencode(query)}"

    def admits(self, blob_id: str, expires: str, signature: str, name: str) -> bool:
        """The link is ours, unchanged and not expired."""
        if not expires.isdigit() or int(expires) < self._clock():
            return False
        # as bytes: a str with non-ASCII characters (any query may hold one) cannot be compared
        expected = self._sign(blob_id, expires, name)
        return hmac.compare_digest(signature.encode(), expected.encode())

    def remaining_s(self, expires: str) -> int:
        """How long a link admitted with this expiry still works (a browser caches no longer)."""
        return max(0, int(int(expires) - self._clock()))

    def _sign(self, blob_id: str, expires: str, name: str) -> str:
        message = "\n".join((blob_id, expires, name)).encode()
        digest = hmac.new(self._secret, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def link_secret(configured: str, folder: Path) -> bytes:
    """`media.url_secret`, or the folder's own secret, made on first use."""
    if configured:
        return configured.encode()
    path = folder / SECRET_FILE
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder / f"{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_hex(32) + "\n")
        os.link(temp, path)  # whole or not at all; a second process starting now reads the first's
    except FileExistsError:
        pass
    finally:
        temp.unlink(missing_ok=True)
    return path.read_bytes().strip()
