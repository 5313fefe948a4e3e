"""The admin view at `/admin`: conversations, session trees, personas, channels, usage, handoffs.

Off unless `admin.token` is set (from the environment). Every request proves the token, as
`Authorization: Bearer <token>` or the cookie the login form sets, compared in constant time;
requests from non-loopback clients, or relayed by a proxy not in `admin.trusted_proxies`, are
refused unless `admin.allow_remote` (who the client is: bot/ops/admin/client.py); an address
that sent too many wrong tokens, or every address after too many from all of them, is answered
429 for a while (bot/ops/admin/throttle.py). Pages are
rendered on the server by Jinja2 with autoescaping on: what users wrote is shown as text, never
as HTML. The only script is the console's own (static/console.js, for live updates); the CSP
allows nothing else. With a handoff desk the view is read-write for operators (operators.py).
The layout is base.html: a section adds a link to `AdminView.nav` and a template extending it.
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
from bot.handoff.desk import HandoffDesk
from bot.ops.admin.approvals import AdminApprovals, ApprovalConsole
from bot.ops.admin.client import ClientAddress
from bot.ops.admin.operators import NAME_COOKIE, OperatorConsole, operator_name, page_number
from bot.ops.admin.pairing import PairingDesk, PairingPage
from bot.ops.admin.schedules import AdminSchedules
from bot.ops.admin.throttle import SignInThrottle
from bot.ops.health import ChannelStates
from bot.reports.sessions_view import find_session, session_tree
from bot.reports.usage import usage_report
from bot.runtime.config.schema import AdminConfig, ModelPrice
from bot.storage.roles import AdminViewRecords, ScheduleRecords
from tools.mcp.state import ServerState

COOKIE = "bot_admin"
CONVERSATIONS = 50
USAGE_DAYS = 30
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
STATIC = Path(__file__).parent / "static"
# only our own stylesheet and script, no framing, no referrer beyond the site
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self';"
        " img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    # same-origin: no referrer leaves the site, and forms carry their Origin (no-referrer makes
    # a browser send `Origin: null`, which the CSRF check refuses)
    "Referrer-Policy": "same-origin",
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
    approvals: ApprovalConsole | None = None  # requests waiting for a yes (bot/approvals/)
    schedules: ScheduleRecords | None = None  # scheduled messages (bot/ops/admin/schedules.py)
    handoff: HandoffDesk | None = None  # operators answer users here (None: read-only)


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
        self._csrf = hmac.new(self._token, b"bot admin csrf", hashlib.sha256).hexdigest()
        # the layout's links: another section appends (label, path) before `install`
        self.nav: list[tuple[str, str]] = [("Conversations", "/admin")]
        self.console: OperatorConsole | None = None
        if sources.handoff is not None:
            self.nav.insert(0, ("Handoffs", "/admin/handoffs"))
            self.console = OperatorConsole(
                sources.handoff, sources.store, self._guard, self._page, lambda _: self._csrf
            )
        sections = (
            ("Approvals", "/admin/approvals", sources.approvals),
            ("Pairing", "/admin/pairing", sources.pairing),
            ("Schedules", "/admin/schedules", sources.schedules),
        )
        self.nav += [(label, path) for label, path, source in sections if source is not None]
        self.nav.append(("System", "/admin#system"))

    def install(self, app: web.Application) -> None:
        app.router.add_get("/admin", self._guard(self._index))
        app.router.add_get("/admin/sessions/{session_id}", self._guard(self._session))
        if self.sources.approvals is not None:
            forms = hmac.new(self._token, b"bot admin forms", hashlib.sha256).hexdigest()
            AdminApprovals(self.sources.approvals, forms, self._page).install(app, self._guard)
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
        if self.sources.schedules is not None:
            schedules = AdminSchedules(
                self.sources.schedules,
                guard=self._guard,
                page=self._page,
                form_token=self._form_token,
            )
            schedules.install(app)
        app.router.add_get("/admin/static/{name:admin.css|console.js}", self._static)
        if self.console is not None:
            self.console.install(app)

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
        name = form.get("name")
        response.set_cookie(
            NAME_COOKIE,
            operator_name(name if isinstance(name, str) else None),
            path="/admin",
            samesite="Strict",
            secure=self._allow_remote or request.secure,
        )
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
        q = request.query.get("q", "").strip()[:200]
        number = page_number(request)
        conversations = await src.store.conversations(
            channel=channel,
            user_id=user,
            limit=CONVERSATIONS + 1,
            search=q or None,
            offset=(number - 1) * CONVERSATIONS,
        )
        since = (datetime.now(UTC) - timedelta(days=USAGE_DAYS)).date().isoformat()
        usage = await usage_report(src.store, src.prices, by=("day", "model"), since=since)
        states = src.channel_states.report()
        channels = {name: states.get(name, {"state": "not started"}) for name in src.channels()}
        return self._page(
            "index.html",
            conversations=conversations[:CONVERSATIONS],
            more=len(conversations) > CONVERSATIONS,
            page=number,
            q=q,
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

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        kind = "text/css" if name.endswith(".css") else "text/javascript"
        return web.Response(
            body=(STATIC / name).read_bytes(),
            content_type=kind,
            headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"},
        )

    def _page(self, template: str, *, status: int = 200, **values: Any) -> web.Response:
        values.setdefault("nav", self.nav)
        values.setdefault("csrf", self._csrf)
        values.setdefault("operators", self.console is not None)
        html = self._templates.get_template(template).render(**values)
        return web.Response(
            text=html, status=status, content_type="text/html", headers=HEADERS, charset="utf-8"
        )
