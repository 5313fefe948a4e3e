"""The read-only admin view at `/admin`: conversations, session trees, personas, channels, usage.

Off unless `admin.token` is set (from the environment). Every request proves the token, as
`Authorization: Bearer <token>` or the cookie the login form sets, compared in constant time;
requests from non-loopback clients, or relayed by a proxy not in `admin.trusted_proxies`, are
refused unless `admin.allow_remote` (who the client is: bot/ops/admin/client.py); an address
that sent too many wrong tokens, or every address after too many from all of them, is answered
429 for a while (bot/ops/admin/throttle.py). Pages are
rendered on the server by Jinja2 with autoescaping on: what users wrote is shown as text, never
as HTML, and the pages run no script.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from agent.personas import PersonaLibrary
from bot.ops.admin.client import ClientAddress
from bot.ops.admin.pairing import PairingDesk, PairingPage
from bot.ops.admin.throttle import SignInThrottle
from bot.ops.health import ChannelStates
from bot.reports.sessions_view import find_session, session_tree
from bot.reports.usage import usage_report
from bot.runtime.config.schema import AdminConfig, ModelPrice
from bot.storage.roles import AdminViewRecords
from tools.mcp.state import ServerState

COOKIE = "bot_admin"
CONVERSATIONS = 50
USAGE_DAYS = 30
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# no script, no framing, no referrer: the pages are static HTML and a form
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class AdminSources:
    """What the pages read; all of it is the running app's own state."""

    store: AdminViewRecords
    personas: PersonaLibrary
    channel_states: ChannelStates
    channels: Callable[[], list[str]]
    prices: Mapping[str, ModelPrice]
    tool_servers: Callable[[], Mapping[str, ServerState]] = dict  # the MCP servers, by name
    pairing: PairingDesk | None = None  # the pairing section (bot/ops/admin/pairing.py)


class AdminView:
    def __init__(self, config: AdminConfig, sources: AdminSources) -> None:
        if not config.token:
            raise ValueError("admin.token is empty; set BOT_ADMIN_TOKEN to turn /admin on")
        self._token = config.token.encode()
        # the cookie proves the token without holding it (a copied cookie jar leaks no token)
        self._cookie = hmac.new(self._token, b"bot admin cookie", hashlib.sha256).hexdigest()
        # what the pages' forms carry back (CSRF): only a page this server rendered has it
        self._form_token = hmac.new(self._token, b"bot admin form", hashlib.sha256).hexdigest()
        self._allow_remote = config.allow_remote
        self._clients = ClientAddress(config.trusted_proxies)
        self._throttle = SignInThrottle()
        self.sources = sources
        self._templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
            autoescape=True,  # every template, whatever its name
            undefined=jinja2.StrictUndefined,
        )
        self._templates.filters["utc"] = _utc

    def install(self, app: web.Application) -> None:
        app.router.add_get("/admin", self._guard(self._index))
        app.router.add_get("/admin/sessions/{session_id}", self._guard(self._session))
        app.router.add_get("/admin/login", self._login_form)
        app.router.add_post("/admin/login", self._login)
        if self.sources.pairing is not None:
            section = PairingPage(
                self.sources.pairing,
                guard=self._guard,
                page=self._page,
                form_token=self._form_token,
            )
            section.install(app)

    # -- access --------------------------------------------------------------------------
    def _remote_refused(self, request: web.Request) -> bool:
        if self._allow_remote:
            return False
        client = self._clients.of(request)  # None: relayed by a stranger, or not TCP
        return client is None or not client.is_loopback

    def _source(self, request: web.Request) -> str:
        """What the throttle counts by: the client a trusted proxy names, else the peer."""
        client = self._clients.of(request)
        return str(client) if client is not None else request.remote or ""

    def _refuse_throttled(self, request: web.Request) -> None:
        wait = self._throttle.retry_after(self._source(request))
        if wait is not None:
            raise web.HTTPTooManyRequests(
                text="too many wrong admin tokens; try again later\n",
                headers={"Retry-After": str(wait)},
            )

    def _valid(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self._token)

    def _valid_cookie(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(), self._cookie.encode())

    def _guard(self, handler: Handler) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            if self._remote_refused(request):
                raise web.HTTPForbidden(text="the admin view answers loopback addresses only\n")
            if self._valid_cookie(request.cookies.get(COOKIE)):
                return await handler(request)  # signed in before: no guess to hold off
            self._refuse_throttled(request)
            auth = request.headers.get("Authorization", "")
            bearer = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
            if not self._valid(bearer):
                if bearer is not None or COOKIE in request.cookies:
                    self._throttle.failed(self._source(request))  # a guess, not a first visit
                if bearer is None and "text/html" in request.headers.get("Accept", ""):
                    raise web.HTTPSeeOther("/admin/login")
                raise web.HTTPUnauthorized(
                    text="admin token required\n", headers={"WWW-Authenticate": "Bearer"}
                )
            self._throttle.succeeded(self._source(request))
            return await handler(request)

        return guarded

    async def _login_form(self, request: web.Request) -> web.StreamResponse:
        if self._remote_refused(request):
            raise web.HTTPForbidden(text="the admin view answers loopback addresses only\n")
        return self._page("login.html", status=200, failed=False)

    async def _login(self, request: web.Request) -> web.StreamResponse:
        if self._remote_refused(request):
            raise web.HTTPForbidden(text="the admin view answers loopback addresses only\n")
        self._refuse_throttled(request)
        form = await request.post()
        token = form.get("token")
        if not self._valid(token if isinstance(token, str) else None):
            self._throttle.failed(self._source(request))
            return self._page("login.html", status=401, failed=True)
        self._throttle.succeeded(self._source(request))
        response = web.HTTPSeeOther("/admin")
        # From afar the view is served over TLS (README): the cookie must never travel in clear.
        secure = self._allow_remote or request.secure
        response.set_cookie(
            COOKIE, self._cookie, path="/admin", httponly=True, samesite="Strict", secure=secure
        )
        raise response

    # -- pages ---------------------------------------------------------------------------
    async def _index(self, request: web.Request) -> web.StreamResponse:
        src = self.sources
        channel = request.query.get("channel") or None
        user = request.query.get("user") or None
        conversations = await src.store.conversations(
            channel=channel, user_id=user, limit=CONVERSATIONS
        )
        since = (datetime.now(UTC) - timedelta(days=USAGE_DAYS)).date().isoformat()
        usage = await usage_report(src.store, src.prices, by=("day", "model"), since=since)
        states = src.channel_states.report()
        channels = {name: states.get(name, {"state": "not started"}) for name in src.channels()}
        return self._page(
            "index.html",
            conversations=conversations,
            channel=channel or "",
            user=user or "",
            personas=sorted(src.personas.all().values(), key=lambda p: p.name),
            persona_errors=src.personas.errors(),
            channels=channels,
            tool_servers=src.tool_servers(),
            usage=usage,
        )

    async def _session(self, request: web.Request) -> web.StreamResponse:
        store = self.sources.store
        try:
            session = await find_session(store, request.match_info["session_id"])
        except LookupError as exc:
            raise web.HTTPNotFound(text=f"{exc.args[0]}\n") from None
        tree = await session_tree(store, session)
        return self._page("session.html", tree=tree)

    def _page(self, template: str, *, status: int = 200, **values: Any) -> web.Response:
        html = self._templates.get_template(template).render(**values)
        return web.Response(
            text=html, status=status, content_type="text/html", headers=HEADERS, charset="utf-8"
        )
