"""The widget's files: the upload route (`POST <path>/files`) and attachments as signed links.

The route takes a file for the conversation whose upload token (`ready.upload.token`, short
lived) it carries as `Authorization: Bearer …`; a page of an origin the socket would refuse is
refused here too (and is told so by CORS: the widget runs on other sites' pages). The answer is
the attachment object a `message` frame then carries (adapters/uploads.py). Outbound, a part
becomes its JSON plus `url`: a signed, expiring link to the blob store's route.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from aiohttp import hdrs, web

from adapters.base import BlobLinks
from adapters.rates import InboundRates
from adapters.uploads import UploadRefused, UploadSigner, receive, rendered
from adapters.websocket.admission import Admission
from content.blobs import BlobStore
from content.parts import Part

log = logging.getLogger(__name__)


class WidgetFiles:
    """Uploads in and links out for one web socket channel."""

    def __init__(
        self,
        blobs: BlobStore,
        links: BlobLinks,
        signer: UploadSigner,
        admission: Admission,
        *,
        path: str,
        public_url: str | None,
        rates: InboundRates | None = None,
        per_minute: int = 30,
    ) -> None:
        """`rates`: uploads count against the conversation's messages a minute (`per_minute`,
        the socket's `rate_limit_per_minute`), as the sessions API's do: more tokens or more
        sockets buy no more."""
        self.rates = rates
        self.per_minute = per_minute
        self.blobs = blobs
        self.links = links
        self.signer = signer
        self.admission = admission
        self.path = path.rstrip("/") + "/files"
        self._base = (public_url or "").rstrip("/")

    def install(self, app: web.Application) -> None:
        app.router.add_post(self.path, self.upload)
        app.router.add_route("OPTIONS", self.path, self.preflight)

    def ready_fields(self, identity: str) -> dict[str, Any]:
        """What `ready` tells a client about uploads: where, with which token, how large."""
        token = self.signer.token(identity)
        return {"url": self.path, "token": token, "max_bytes": self.blobs.max_bytes}

    def attachments(self, parts: Sequence[Part]) -> list[dict[str, Any]]:
        """The media parts as frames carry them: their JSON and a signed link each."""
        return rendered(parts, self.links, self._base)

    async def preflight(self, request: web.Request) -> web.Response:
        return web.Response(status=204, headers=self._cors(request, preflight=True))

    async def upload(self, request: web.Request) -> web.Response:
        headers = self._cors(request)
        try:
            self.admission.check_origin(request)
            token = request.headers.get(hdrs.AUTHORIZATION, "").removeprefix("Bearer ").strip()
            scope = self.signer.scope_of(token) if token else None
            if scope is None:
                raise UploadRefused(
                    401,
                    "upload needs `Authorization: Bearer <ready.upload.token>`, unexpired"
                    " (a new socket's ready gives a new one)",
                )
            await self._take_rate(scope)
            blob = await receive(request, self.blobs, source="upload")
        except UploadRefused as exc:
            log.info("websocket upload refused (%d): %s", exc.status, exc)
            if exc.retry_after is not None:
                headers |= {hdrs.RETRY_AFTER: str(exc.retry_after)}
            return web.json_response({"error": str(exc)}, status=exc.status, headers=headers)
        except web.HTTPForbidden as exc:
            return web.json_response({"error": exc.text}, status=403, headers=headers)
        return web.json_response(
            {"attachment": self.signer.reference(scope, blob)}, status=201, headers=headers
        )

    async def _take_rate(self, scope: str) -> None:
        """Before the body is read: a refused upload costs a few bytes, not the file."""
        if self.rates is None:
            return
        waited = await self.rates.take(f"websocket:{scope}", self.per_minute)
        if waited > 0:
            wait_s = math.ceil(waited)
            raise UploadRefused(
                429,
                f"more than {self.per_minute} messages and uploads a minute in this conversation;"
                f" upload again in {wait_s} s",
                retry_after=wait_s,
            )

    def _cors(self, request: web.Request, *, preflight: bool = False) -> dict[str, str]:
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is None or not self.admission.allows_origin(request, origin):
            return {}
        headers = {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}
        if not preflight:  # the page's script may read how long a 429 asks it to wait
            headers["Access-Control-Expose-Headers"] = "Retry-After"
        if preflight:
            headers |= {
                "Access-Control-Allow-Methods": "POST",
                "Access-Control-Allow-Headers": "Authorization, Content-Type",
                "Access-Control-Max-Age": "600",
            }
        return headers
