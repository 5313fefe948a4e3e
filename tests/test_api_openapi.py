"""The sessions API's OpenAPI document: it matches the routes, and the API keeps its promises
under schemathesis (property-based): malformed requests get a clear 4xx JSON error, never a 500."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.core.parameters import ParameterLocation

from adapters.api.base import PREFIX
from adapters.api.channel import ApiChannel
from adapters.api.handlers import SESSION_ID
from adapters.api.keys import KeyRing
from adapters.api.openapi import document
from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.api_kit import KEY_A, api_section
from tests.conftest import make_config

SCHEMA = schemathesis.openapi.from_dict(document())
OPERATIONS = sorted(
    (method.upper(), path)
    for path, item in document()["paths"].items()
    for method in item
    if method in {"get", "post", "put", "patch", "delete"}
)
AUTH = {"Authorization": f"Bearer {KEY_A}"}


def test_the_document_names_exactly_the_routes_the_channel_serves() -> None:
    app = web.Application()
    ApiChannel(keys=KeyRing([])).install(app)
    served = {
        (route.method, route.resource.canonical.removeprefix(PREFIX))
        for route in app.router.routes()
        if route.resource is not None
        and route.resource.canonical.startswith(PREFIX)
        and route.method != "HEAD"
    }
    served.discard(("GET", "/openapi.json"))  # the document itself
    assert served == set(OPERATIONS)
    assert document()["servers"] == [{"url": PREFIX}]


@dataclass
class Served:
    base: str
    sessions: list[str]
    app: App


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A running app in a thread of its own, for the synchronous schemathesis calls."""
    tmp_path: Path = tmp_path_factory.mktemp("api")
    config = make_config(
        tmp_path,
        channels=api_section(
            rate_limit_per_minute=1_000_000, stream_timeout_s=10, max_text_chars=500
        ),
    )
    app = App(config, base_dir=tmp_path, provider=ScriptedProvider(lambda request: Reply("ok")))
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop: asyncio.Event | None = None

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        async with app:
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(20), "the app did not start"
    base = f"{app.url}{PREFIX}"
    created = requests.post(f"{base}/sessions", headers=AUTH, timeout=10)
    assert created.status_code == 201
    yield Served(base, [created.json()["id"]], app)
    assert stop is not None
    loop.call_soon_threadsafe(stop.set)
    thread.join(20)
    loop.close()


def test_the_document_is_served(served: Served) -> None:
    response = requests.get(f"{served.base}/openapi.json", timeout=10)
    assert response.status_code == 200
    assert response.json() == document(max_text_chars=500)


def _malformed(case: Any, location: ParameterLocation) -> bool:
    info = case.meta.components.get(location) if case.meta is not None else None
    return info is not None and info.mode == schemathesis.GenerationMode.NEGATIVE


def _query_breaks_schema(method: str, path: str, url: str) -> bool:
    """Whether the query string as sent breaks the document. A negative case can be malformed
    only in a way the URL loses: the integer 37123842 generated as the string "37123842"."""
    operation = document()["paths"][path][method.lower()]
    declared = {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"}
    sent = parse_qs(urlsplit(url).query, keep_blank_values=True)
    if set(sent) - set(declared) or any(len(values) > 1 for values in sent.values()):
        return True
    if any(p.get("required") and name not in sent for name, p in declared.items()):
        return True
    for name, [value] in sent.items():
        schema = declared[name]["schema"]
        if schema.get("type") == "integer":
            if not re.fullmatch(r"-?[0-9]+", value):
                return True
            number = int(value)
            if not schema.get("minimum", number) <= number <= schema.get("maximum", number):
                return True
        elif schema.get("type") != "string":
            return True  # nothing else is declared: a new kind must be taught here
    return False


# Headers that frame the HTTP message itself: a generated value (Content-Length ",lN2=5") makes
# a message aiohttp's parser refuses with its own plain-text 400 before any handler sees it
FRAMING = frozenset({"content-length", "transfer-encoding"})


def _check(response: schemathesis.Response, negative: bool, framing: bool = False) -> None:
    status = response.status_code
    assert status < 500, f"{status}: {response.text[:300]}"
    if negative:
        assert 400 <= status < 500, f"malformed request accepted with {status}"
    if framing and status == 400 and response.headers["content-type"][0].startswith("text/plain"):
        return  # not an HTTP message: the server's parser answered, not the API
    if status >= 400:
        assert response.headers["content-type"][0].startswith("application/json")
        error = response.json()["error"]
        assert isinstance(error["code"], str) and error["code"]
        assert isinstance(error["message"], str) and error["message"]


@pytest.mark.parametrize("negative", [False, True], ids=["valid", "malformed"])
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_no_request_gets_a_server_error(
    served: Served, method: str, path: str, negative: bool
) -> None:
    """Generated from the document; in `malformed` mode every request breaks the schema somehow
    and must be refused with a 4xx JSON error. Session ids that match the schema are swapped for
    a real session, so the bodies reach the handlers rather than stopping at 404."""
    mode = (
        schemathesis.GenerationMode.NEGATIVE if negative else schemathesis.GenerationMode.POSITIVE
    )
    operation = SCHEMA[path][method]

    @settings(
        max_examples=25,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: the message names the request
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode), real=st.booleans())
    def run(case: Any, real: bool) -> None:
        session_id = (case.path_parameters or {}).get("session_id")
        # (not for /events: a valid request there follows the session until it times out)
        real = real and not path.endswith("/events")
        if real and isinstance(session_id, str) and SESSION_ID.fullmatch(session_id):
            case.path_parameters["session_id"] = served.sessions[0]
        # A generated key is never valid: use ours, unless the headers are what is malformed
        # (a missing or empty Authorization among them), which must then be refused.
        headers = {} if _malformed(case, ParameterLocation.HEADER) else AUTH
        response = case.call(base_url=served.base, headers=headers, timeout=20)
        try:
            # schemathesis falls back to a valid case where it finds nothing to break
            broken = any(
                _malformed(case, where)
                for where in ParameterLocation
                if where is not ParameterLocation.QUERY
            )
            if _malformed(case, ParameterLocation.QUERY):
                broken = broken or _query_breaks_schema(method, path, response.request.url or "")
            framing = any(name.lower() in FRAMING for name in case.headers or {})
            _check(response, broken, framing)
        except AssertionError as exc:
            request = response.request
            raise AssertionError(
                f"{exc}\n{request.method} {request.url}\n{request.headers}\n{request.body!r:.500}"
            ) from None

    run()
