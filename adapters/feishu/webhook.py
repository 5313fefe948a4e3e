"""HTTP event callbacks, verified by us before anything runs.

lark-oapi compares the signature with `!=`, checks no timestamp and skips the check without an
encrypt key, so this route does it all itself: `X-Lark-Signature` must be
`sha256_hex(timestamp + nonce + encrypt_key + body)` (compared in constant time), the timestamp
within `WINDOW_S` of our clock, and the signature not seen before inside that window (a replay).
The body (`{"encrypt": base64(iv + AES-256-CBC(json))}`, key `sha256(encrypt_key)`) is then
decrypted and its verification token compared, also in constant time. `url_verification` (which
Feishu may send unsigned) is answered with its challenge once decrypted and its token matches.
Anything else is refused with 401 (a body we cannot parse: 400) and never reaches the handler.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web
from Crypto.Cipher import AES

log = logging.getLogger(__name__)

WINDOW_S = 300.0  # how old (or how far ahead) a signed timestamp may be
REMEMBERED = 100_000  # more than Feishu sends in WINDOW_S to one app


class Refused(Exception):
    """Not a genuine Feishu request: answered 401."""


class Malformed(Exception):
    """Signed (or a challenge) but not JSON we can read, such as nesting past the parser's
    recursion limit: answered 400, never a 500 with a traceback."""


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def decrypt(encrypted: str, encrypt_key: str) -> bytes:
    key = hashlib.sha256(encrypt_key.encode()).digest()
    raw = base64.b64decode(encrypted, validate=True)
    if len(raw) < 32 or len(raw) % 16:
        raise ValueError("not AES-CBC blocks")
    plain = AES.new(key, AES.MODE_CBC, raw[:16]).decrypt(raw[16:])
    pad = plain[-1]
    if not 1 <= pad <= 16 or plain[-pad:] != bytes([pad]) * pad:
        raise ValueError("bad padding")
    return plain[:-pad]


class CallbackVerifier:
    def __init__(
        self,
        encrypt_key: str,
        verification_token: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = encrypt_key
        self._token = verification_token.encode()
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()  # signature -> when seen

    def open(self, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
        """The verified, decrypted payload, or `Refused`."""
        given = headers.get("X-Lark-Signature", "")
        timestamp = headers.get("X-Lark-Request-Timestamp", "")
        nonce = headers.get("X-Lark-Request-Nonce", "")
        signed = bool(given or timestamp or nonce)
        if signed:
            self._check_signature(given, timestamp, nonce, body)
        payload = self._decrypt(body)
        header = payload.get("header")
        token = header.get("token") if isinstance(header, dict) else payload.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self._token):
            raise Refused("wrong verification token")
        if not signed and payload.get("type") != "url_verification":
            raise Refused("unsigned event")
        return payload

    def forget(self, headers: Mapping[str, str]) -> None:
        """A request that was verified but not taken (503): the same request again is welcome."""
        self._seen.pop(headers.get("X-Lark-Signature", ""), None)

    def _check_signature(self, given: str, timestamp: str, nonce: str, body: bytes) -> None:
        expected = signature(timestamp, nonce, self._key, body)
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise Refused("bad signature")
        # whole seconds in ASCII digits: float() would take "nan", which no window excludes
        if not (0 < len(timestamp) <= 12 and timestamp.isascii() and timestamp.isdigit()):
            raise Refused("bad timestamp")
        age = self._clock() - int(timestamp)
        if abs(age) > WINDOW_S:
            raise Refused(f"timestamp {age:.0f} s off")
        now, seen = self._clock(), self._seen
        while seen and (now - next(iter(seen.values())) > WINDOW_S or len(seen) >= REMEMBERED):
            seen.popitem(last=False)  # the oldest first: expired, or too many to keep
        if given in seen:
            raise Refused("replayed")
        seen[given] = now

    def _decrypt(self, body: bytes) -> dict[str, Any]:
        try:
            outer = json.loads(body)
            encrypted = outer.get("encrypt") if isinstance(outer, dict) else None
            if not isinstance(encrypted, str):
                raise Refused("not encrypted")  # we only run with an encrypt key
            payload = json.loads(decrypt(encrypted, self._key))
        except (ValueError, UnicodeDecodeError) as exc:
            raise Refused(f"undecryptable body ({type(exc).__name__})") from None
        except RecursionError:
            raise Malformed("JSON nested too deep") from None
        if not isinstance(payload, dict):
            raise Refused("not an event")
        return payload


async def read_callback(
    request: web.Request, verifier: CallbackVerifier
) -> dict[str, Any] | web.Response:
    """The payload, or the response that refuses the request."""
    body = await request.read()
    try:
        return verifier.open(request.headers, body)
    except Refused as exc:
        log.info("Feishu callback refused from %s: %s", request.remote, exc)
        return web.json_response({"msg": "unauthorized"}, status=401)
    except Malformed as exc:
        log.info("Feishu callback refused from %s: %s", request.remote, exc)
        return web.json_response({"msg": "malformed body"}, status=400)
