"""Tools that call the network, against local fake servers: exchange rates, web search, news."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from tests.fake_http import FakeHttp, closed_port_url
from tests.tools_kit import call, call_json, context, settings
from tools.builtin.news import parse_feed
from tools.shared_http import SharedSession

RATES = {
    "result": "success",
    "base_code": "USD",
    "time_last_update_utc": "Mon, 30 Nov 2026 00:00:01 +0000",
    "rates": {"USD": 1, "HKD": 7.8, "EUR": 0.9},
}


# -- get_exchange_rate ---------------------------------------------------------------------------
async def test_live_rate_converts_and_is_cached() -> None:
    async with FakeHttp() as fake:
        fake.json("/latest/USD", RATES)
        config = settings(exchange_rate={"url": fake.url + "/latest/{base}"})
        http = SharedSession()
        await http.open()
        try:
            ctx = context(config=config, http=http)
            data = await call_json(
                "get_exchange_rate", {"from": "usd", "to": "HKD", "amount": 1000}, ctx
            )
            again = await call_json("get_exchange_rate", {"from": "USD", "to": "EUR"}, ctx)
        finally:
            await http.close()
    assert data["rate"] == 7.8 and data["is_estimate"] is False
    assert data["converted_amount"] == 7800.0
    assert data["message"] == "1000 USD = 7,800.00 HKD; 1 USD = 7.8 HKD (live rate)"
    assert data["last_update"] == RATES["time_last_update_utc"]
    assert again["rate"] == 0.9
    assert len(fake.seen("/latest/USD")) == 1  # the second call used the cached rates
    assert fake.requests[0].headers["User-Agent"].startswith("chat-gateway-tools")


async def test_a_deadline_longer_than_the_shared_sessions_bound_is_kept() -> None:
    """`tools.http_timeout_s` past the app's shared session's own bound (60 s; 0.1 s here) is
    the request's deadline: the session's bound cut it short before, and the message then named
    the configured deadline as the one missed."""
    body = json.dumps(RATES).encode()
    async with FakeHttp() as fake:
        fake.stream("/latest/USD", body, 1, "application/json")  # slower than 0.1 s in all
        config = settings(exchange_rate={"url": fake.url + "/latest/{base}"}, http_timeout_s=60)
        http = SharedSession(timeout_s=0.1)
        await http.open()
        try:
            started = time.monotonic()
            data = await call_json(
                "get_exchange_rate", {"from": "USD", "to": "HKD"}, context(config=config, http=http)
            )
        finally:
            await http.close()
    assert time.monotonic() - started > 0.1  # the answer took longer than the session's bound
    assert data["rate"] == 7.8 and data["is_estimate"] is False


async def test_key_goes_into_the_url_and_never_into_the_answer() -> None:
    async with FakeHttp() as fake:
        fake.json(
            "/v6/s3cret-key/latest/EUR", {"result": "success", "conversion_rates": {"USD": 1.1}}
        )
        url = fake.url + "/v6/{key}/latest/{base}"
        ctx = context(config=settings(exchange_rate={"url": url, "api_key": "s3cret-key"}))
        data = await call_json("get_exchange_rate", {"from": "EUR", "to": "USD"}, ctx)
        assert data["rate"] == 1.1 and not data["is_estimate"]
        fake.routes.clear()  # now every path is a 404
        ctx = context(config=settings(exchange_rate={"url": url, "api_key": "s3cret-key"}))
        result = await call("get_exchange_rate", {"from": "EUR", "to": "USD"}, ctx)
    assert json.loads(result.text)["is_estimate"] is True
    assert "s3cret" not in result.text and "HTTP 404" in result.text


async def test_unreachable_api_falls_back_to_the_reference_table() -> None:
    ctx = context(config=settings(exchange_rate={"url": closed_port_url() + "/{base}"}))
    data = await call_json("get_exchange_rate", {"from": "CNY", "to": "HKD", "amount": 100}, ctx)
    assert data["is_estimate"] is True
    assert data["rate"] == round(7.78 / 7.24, 6)  # across USD
    assert "≈" in data["message"] and "may be out of date" in data["message"]
    assert "unreachable" in data["note"]
    inverse = await call_json("get_exchange_rate", {"from": "HKD", "to": "USD"}, ctx)
    assert inverse["rate"] == round(1 / 7.78, 6)


async def test_slow_api_falls_back_before_the_tool_deadline() -> None:
    async with FakeHttp() as fake:
        fake.hang("/USD")
        config = settings(http_timeout_s=0.05, exchange_rate={"url": fake.url + "/{base}"})
        data = await call_json(
            "get_exchange_rate", {"from": "USD", "to": "EUR"}, context(config=config)
        )
    assert data["is_estimate"] is True and data["rate"] == 0.92
    assert "did not answer within 0.05 s" in data["note"]


async def test_rate_errors_name_the_fix() -> None:
    ctx = context(config=settings(exchange_rate={"url": None}))
    bad = await call("get_exchange_rate", {"from": "dollars", "to": "EUR"}, ctx)
    assert not bad.ok and "'dollars' is not an ISO 4217 code" in bad.text
    unknown = await call("get_exchange_rate", {"from": "XAU", "to": "EUR"}, ctx)
    assert not unknown.ok and "no reference rate for XAU/EUR" in unknown.text
    missing = await call("get_exchange_rate", {"from_currency": "USD", "to": "EUR"}, ctx)
    assert missing.text.splitlines()[:2] == [
        "get_exchange_rate: argument 'from': Field required",
        "get_exchange_rate: argument 'from_currency': Extra inputs are not permitted",
    ]


# -- web_search -----------------------------------------------------------------------------------
SEARX = {
    "results": [
        {"title": "Visa rules", "url": "https://gov.example/visa", "content": "All about visas."},
        {"title": "Not a page", "url": "javascript:alert(1)", "content": "dropped"},
        {"title": "Fees", "url": "https://gov.example/fees", "content": "What it costs."},
        {"title": "Third", "url": "https://gov.example/3", "content": "three"},
    ]
}


async def test_searxng_results_are_capped_and_cleaned() -> None:
    async with FakeHttp() as fake:
        fake.json("/search", SEARX)
        config = settings(
            web_search={"backend": "searxng", "url": fake.url + "/", "max_results": 2}
        )
        data = await call_json(
            "web_search",
            {"query": "visa fees", "site": "gov.example", "language": "en"},
            context(config=config),
        )
    assert data["success"] is True and data["result_count"] == 2
    assert data["results"] == [
        {"title": "Visa rules", "url": "https://gov.example/visa", "snippet": "All about visas."},
        {"title": "Fees", "url": "https://gov.example/fees", "snippet": "What it costs."},
    ]
    assert fake.requests[0].query == {
        "q": "visa fees site:gov.example",
        "format": "json",
        "language": "en",
    }


async def test_brave_and_google_speak_their_own_formats() -> None:
    async with FakeHttp() as fake:
        fake.json(
            "/brave",
            {"web": {"results": [{"title": "B", "url": "https://b.example", "description": "b!"}]}},
        )
        fake.json(
            "/google", {"items": [{"title": "G", "link": "https://g.example", "snippet": "g!"}]}
        )
        brave = settings(
            web_search={"backend": "brave", "url": fake.url + "/brave", "api_key": "bk"}
        )
        google = settings(
            web_search={
                "backend": "google",
                "url": fake.url + "/google",
                "api_key": "gk",
                "engine_id": "cx1",
            }
        )
        b = await call_json("web_search", {"query": "x"}, context(config=brave))
        g = await call_json("web_search", {"query": "y", "language": "de"}, context(config=google))
    assert b["results"] == [{"title": "B", "url": "https://b.example", "snippet": "b!"}]
    assert g["results"] == [{"title": "G", "url": "https://g.example", "snippet": "g!"}]
    assert fake.seen("/brave")[0].headers["X-Subscription-Token"] == "bk"
    assert fake.seen("/google")[0].query == {
        "key": "gk",
        "cx": "cx1",
        "q": "y",
        "num": "5",
        "hl": "de",
    }


async def test_no_backend_suggests_sites_and_invents_nothing() -> None:
    sites = {"Immigration Office": "https://immigration.example"}
    data = await call_json(
        "web_search",
        {"query": "visa"},
        context(config=settings(web_search={"suggested_sites": sites})),
    )
    assert data["success"] is False and data["results"] == []
    assert data["suggested_sites"] == [
        {"name": "Immigration Office", "url": "https://immigration.example"}
    ]
    assert "no search backend is configured" in data["message"]


async def test_failing_backend_is_reported_not_papered_over() -> None:
    async with FakeHttp() as fake:
        fake.json("/search", {"error": "rate limited"}, status=429)
        fake.json("/odd/search", {"results": "not a list"})
        broken = settings(web_search={"backend": "searxng", "url": fake.url})
        odd = settings(web_search={"backend": "searxng", "url": fake.url + "/odd"})
        data = await call_json("web_search", {"query": "visa"}, context(config=broken))
        shape = await call_json("web_search", {"query": "visa"}, context(config=odd))
    assert data["success"] is False and "HTTP 429" in data["message"]
    assert shape["success"] is False and "unexpected answer" in shape["message"]
    keyless = settings(web_search={"backend": "brave"})
    data = await call_json("web_search", {"query": "visa"}, context(config=keyless))
    assert data["success"] is False and "WEB_SEARCH_API_KEY" in data["message"]


# -- fetch_news -----------------------------------------------------------------------------------
RSS = """<?xml version="1.0"?><rss version="2.0"><channel><title>Office news</title>
<item><title>Old rule</title><link>https://n.example/1</link>
<description>&lt;p&gt;Before.&lt;/p&gt;</description>
<pubDate>Mon, 01 Jan 2024 10:00:00 GMT</pubDate></item>
<item><title>New rule</title><link>https://n.example/2</link><description>After.</description>
<pubDate>Tue, 02 Jul 2024 10:00:00 GMT</pubDate></item></channel></rss>"""
ATOM = """<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">
<title>Talent blog</title><entry><title>Newest</title><link href="https://t.example/a"/>
<updated>2024-09-01T00:00:00Z</updated><summary>Latest talent news.</summary></entry></feed>"""
BOMB = """<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>
<rss><channel><item><title>&lol2;</title></item></channel></rss>"""
STATIC = {
    "static_items": [
        {
            "title": "Talent visa open",
            "summary": "All year.",
            "date": "2024-01",
            "source": "Office",
            "category": "TALENT",
        },
        {"title": "Graduate stay", "summary": "24 months.", "category": "GRADUATE"},
    ],
    "official_sources": {"Office": "https://office.example/news"},
}


async def test_feeds_are_merged_newest_first() -> None:
    async with FakeHttp() as fake:
        fake.text("/rss", RSS)
        fake.text("/atom", ATOM, content_type="application/atom+xml")
        feeds = {"all": [fake.url + "/rss"], "TALENT": [fake.url + "/atom"]}
        ctx = context(config=settings(news={"feeds": feeds, **STATIC}))
        everything = await call_json("fetch_news", {"limit": 2}, ctx)
        talent = await call_json("fetch_news", {"category": "talent"}, ctx)
    assert [n["title"] for n in everything["news"]] == ["Newest", "New rule"]
    assert everything["news"][0] == {
        "title": "Newest",
        "url": "https://t.example/a",
        "summary": "Latest talent news.",
        "date": "2024-09-01T00:00:00+00:00",
        "source": "Talent blog",
    }
    assert everything["news"][1]["source"] == "Office news"
    assert "is_static" not in everything
    assert [n["title"] for n in talent["news"]] == ["Newest", "New rule", "Old rule"]
    assert talent["news"][2]["summary"] == "Before."  # markup stripped


RSS1 = """<?xml version="1.0" encoding="utf-8"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
 xmlns:dc="http://purl.org/dc/elements/1.1/">
<channel rdf:about="https://j.example/"><title>Japan desk</title><link>https://j.example/</link>
<description>Visa news</description></channel>
<item rdf:about="https://j.example/1"><title>Fees &amp; forms</title><link>https://j.example/1</link>
<description>Fees change in &lt;b&gt;April&lt;/b&gt;.</description>
<dc:date>2024-10-01T09:00:00+09:00</dc:date></item></rdf:RDF>"""
ATOM03 = """<?xml version="1.0" encoding="utf-8"?>
<feed version="0.3" xmlns="http://purl.org/atom/ns#"><title>Old blog</title>
<entry><title>Atom 0.3 entry</title><link rel="alternate" type="text/html" href="/posts/1"/>
<issued>2024-08-01T00:00:00Z</issued><modified>2024-08-02T00:00:00Z</modified>
<content type="text/html" mode="escaped">&lt;p&gt;Body text.&lt;/p&gt;</content></entry></feed>"""


async def test_rss_1_0_and_atom_0_3_feeds_are_read() -> None:
    async with FakeHttp() as fake:
        fake.text("/rdf", RSS1, content_type="application/rdf+xml")
        fake.text("/atom03", ATOM03, content_type="application/atom+xml")
        feeds = {"all": [fake.url + "/rdf", fake.url + "/atom03"]}
        data = await call_json("fetch_news", {}, context(config=settings(news={"feeds": feeds})))
    assert "is_static" not in data, data["message"]
    assert data["news"] == [
        {
            "title": "Fees & forms",
            "url": "https://j.example/1",
            "summary": "Fees change in April .",
            "date": "2024-10-01T00:00:00+00:00",  # dc:date, in UTC
            "source": "Japan desk",
        },
        {
            "title": "Atom 0.3 entry",
            "url": fake.url + "/posts/1",  # relative to the feed's address
            "summary": "Body text.",
            "date": "2024-08-02T00:00:00+00:00",  # modified, not issued
            "source": "Old blog",
        },
    ]


async def test_no_reachable_feed_gives_the_static_items_marked() -> None:
    async with FakeHttp() as fake:
        fake.text("/bomb", BOMB)
        fake.text("/junk", "<html><body>not a feed")
        feeds = {"TALENT": [fake.url + "/bomb", fake.url + "/junk", closed_port_url() + "/rss"]}
        ctx = context(config=settings(news={"feeds": feeds, **STATIC}))
        data = await call_json("fetch_news", {"category": "TALENT"}, ctx)
    assert data["is_static"] is True and data["success"] is True
    assert data["news"] == [
        {
            "title": "Talent visa open",
            "summary": "All year.",
            "date": "2024-01",
            "source": "Office",
            "category": "TALENT",
        }
    ]
    assert data["official_sources"] == [{"name": "Office", "url": "https://office.example/news"}]
    assert "not current news" in data["message"]


async def test_news_argument_errors() -> None:
    ctx = context(config=settings(news={"feeds": {"TALENT": ["http://127.0.0.1:9/x"]}}))
    unknown = await call("fetch_news", {"category": "SPORTS"}, ctx)
    assert not unknown.ok and "unknown category 'SPORTS'; choose one of ['TALENT']" in unknown.text
    too_many = await call("fetch_news", {"limit": 50}, ctx)
    assert not too_many.ok and "limit 50 is out of range" in too_many.text
    nothing = await call_json("fetch_news", {}, context())
    assert nothing["is_static"] is True and nothing["success"] is False and nothing["news"] == []


# -- reading bodies -------------------------------------------------------------------------------
def _feed(items: int) -> bytes:
    """An RSS feed of `items` items of about 500 bytes, each a minute newer than the last."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    entries = "".join(
        f"<item><title>Item {i}</title><link>https://n.example/{i}</link>"
        f"<description>{'words ' * 60}</description>"
        f"<pubDate>{format_datetime(start + timedelta(minutes=i))}</pubDate></item>"
        for i in range(items)
    )
    return (
        f'<?xml version="1.0"?><rss><channel><title>Big</title>{entries}</channel></rss>'.encode()
    )


async def test_a_body_sent_in_small_pieces_is_read_whole() -> None:
    hits = [
        {"title": f"T{i}", "url": f"https://e.example/{i}", "content": "x" * 400}
        for i in range(400)
    ]
    search_body = json.dumps({"results": hits}).encode()
    feed = _feed(600)
    assert len(search_body) > 150_000 and len(feed) > 200_000
    async with FakeHttp() as fake:
        fake.stream("/search", search_body, 16_384, "application/json")
        fake.stream("/feed", feed, 16_384, "application/rss+xml")
        config = settings(
            web_search={"backend": "searxng", "url": fake.url},
            news={"feeds": {"all": [fake.url + "/feed"]}},
        )
        found = await call_json("web_search", {"query": "visa"}, context(config=config))
        news = await call_json("fetch_news", {"limit": 1}, context(config=config))
    assert found["success"] is True, found["message"]
    assert "is_static" not in news, news["message"]
    assert news["news"][0]["title"] == "Item 599"  # the newest is the last item in the feed


async def test_a_body_past_the_cap_is_refused_whatever_its_pieces() -> None:
    async with FakeHttp() as fake:
        fake.stream("/search", b"[" + b"1," * 1_100_000 + b"1]", 65_536, "application/json")
        config = settings(web_search={"backend": "searxng", "url": fake.url})
        data = await call_json("web_search", {"query": "visa"}, context(config=config))
    assert data["success"] is False and "sent more than 2000000 bytes" in data["message"]


async def test_a_big_feed_is_parsed_off_the_event_loop() -> None:
    feed = _feed(2500)  # about 1.3 MB
    started = time.perf_counter()
    parse_feed(feed, "feed")
    parse_s = time.perf_counter() - started
    gaps: list[float] = []

    async def tick() -> None:
        last = time.perf_counter()
        try:
            while True:
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now
        finally:  # a stall just before the cancel counts too
            gaps.append(time.perf_counter() - last)

    gc.disable()  # a full collection stops every thread alike, and is not what is measured
    try:
        async with FakeHttp() as fake, asyncio.TaskGroup() as group:
            fake.text("/feed", feed.decode())
            config = settings(news={"feeds": {"all": [fake.url + "/feed"]}})
            ticker = group.create_task(tick())
            news = await call_json("fetch_news", {"limit": 1}, context(config=config))
            ticker.cancel()
    finally:
        gc.enable()
    assert news["news"][0]["title"] == "Item 2499"
    # parsed on the loop, the loop would stall for the whole parse; in a thread, for a GIL switch
    assert max(gaps) < parse_s / 2, (max(gaps), parse_s)
