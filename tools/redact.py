"""Credentials out of text bound for a log or the store: the `user:password@` part of URLs.

It lives in tools/ because tools is the one package every other may import (DESIGN §2): the
model providers (agent/), the turn runner, the app and the config errors (bot/) all use it.
"""

from __future__ import annotations

import base64
import re
from urllib.parse import unquote, urlsplit, urlunsplit

# scheme://userinfo@ ; up to the authority's last "@" (a password may hold a raw "@")
_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)[^/?#\s'\"<>@]*(?:@[^/?#\s'\"<>@]*)*@", re.I)


def redact_credentials(text: str) -> str:
    """`http://user:s3cret@host/v1` → `http://***@host/v1`, wherever a URL sits in `text`."""
    if "://" not in text:  # no URL: the regex would scan every position to find none
        return text
    return _USERINFO.sub(r"\1***@", text)


def split_credentials(url: str | None) -> tuple[str | None, dict[str, str]]:
    """`http://user:pw@host/v1` → (`http://host/v1`, the Basic `Authorization` header for it).

    The header is what the HTTP client would have sent for the URL's user:password; taken out
    of the URL, the password stays out of every line an SDK logs about its requests.
    """
    if not url or "@" not in url:
        return url, {}
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, {}
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    token = base64.b64encode(pair.encode()).decode("ascii")
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host)), {"Authorization": f"Basic {token}"}
