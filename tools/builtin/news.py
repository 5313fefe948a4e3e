"""The `fetch_news` tool: items from configured RSS/Atom feeds, else configured reference items."""

from __future__ import annotations

import asyncio
import html
import io
import logging
import re
import time
from datetime import UTC, datetime
from typing import Any

from tools.base import ToolContext, ToolError
from tools.builtin.http import Unreachable, fetch
from tools.registry import tool
from tools.settings import NewsSettings

log = logging.getLogger(__name__)

_TAGS = re.compile(r"<[^>]+>")
_FIRST_ELEMENT = re.compile(rb"<[A-Za-z]")
_MARKUP_TYPES = ("text/html", "application/xhtml+xml")
SUMMARY_CHARS = 300


def _plain(detail: Any, value: str) -> str:
    """`value` as plain text: feedparser keeps (sanitized) markup for html and xhtml content."""
    if isinstance(detail, dict) and detail.get("type") in _MARKUP_TYPES:
        value = html.unescape(_TAGS.sub(" ", value))
    return " ".join(value.split())


def _when(parsed: time.struct_time | None) -> datetime | None:
    # feedparser has already read RFC 822, RFC 3339 and W3C-DTF dates into UTC
    return datetime(*parsed[:6], tzinfo=UTC) if parsed else None


def _first(entry: Any, *keys: str) -> Any:
    # `in` before reading: reading a missing `updated*` key warns (feedparser issue 310)
    return next((entry[k] for k in keys if k in entry and entry[k]), None)


def _refuse_entities(body: bytes, source: str) -> None:
    """Refuse a document whose prolog declares XML entities.

    Hand-written on purpose: feedparser strips entity declarations only when each stands on a
    line of its own, and otherwise leaves expansion to expat, whose amplification limit trips
    only after megabytes of expansion (seconds of CPU). Feeds have no use for their own
    entities, so, like defusedxml, refuse any.
    """
    first = _FIRST_ELEMENT.search(body)
    if b"<!ENTITY" in body[: first.start() if first else len(body)]:
        raise Unreachable(f"{source} sent a feed that declares XML entities; refused")


def parse_feed(body: bytes, source: str) -> list[dict[str, Any]]:
    """Items of an RSS 0.9x/1.0/2.0 or Atom document: title, url, summary, date, source."""
    import feedparser  # type: ignore[import-untyped]  # here: ~50 ms a start would pay

    _refuse_entities(body, source)
    # a stream, never bytes or str: feedparser would open those as a path or fetch them as a URL
    parsed = feedparser.parse(
        io.BytesIO(body), response_headers={"content-location": source}, sanitize_html=True
    )
    if not parsed.get("version") and not parsed.entries:
        raise Unreachable(f"{source} did not send a valid RSS or Atom feed")
    feed = parsed.feed
    origin = _plain(feed.get("title_detail"), feed.get("title", "")) or source
    out = []
    for entry in parsed.entries:
        title = _plain(entry.get("title_detail"), entry.get("title", ""))
        if not title:
            continue
        # an entry with content but no summary has the content as summary, without its type
        detail = entry.get("summary_detail") or next(iter(entry.get("content", [])), None)
        summary = _plain(detail, entry.get("summary", ""))
        when = _when(_first(entry, "updated_parsed", "published_parsed"))
        out.append(
            {
                "title": title,
                "url": entry.get("link", ""),
                "summary": summary[:SUMMARY_CHARS],
                "date": when.isoformat() if when else _first(entry, "updated", "published") or "",
                "source": origin,
                "_sort": when,
            }
        )
    return out


async def _read(ctx: ToolContext, url: str) -> list[dict[str, Any]] | Unreachable:
    try:
        body = await fetch(ctx, url)
        # feedparser takes about a second per MB of feed: off the loop, so other chats keep moving
        return await asyncio.to_thread(parse_feed, body, url)
    except Unreachable as exc:
        return exc


def _static(config: NewsSettings, category: str | None, limit: int) -> list[dict[str, Any]]:
    items = [
        i
        for i in config.static_items
        if not category or not i.category or i.category.upper() == category.upper()
    ]
    return [i.model_dump(exclude_defaults=True) for i in items[:limit]]


@tool(read_only=True)
async def fetch_news(
    ctx: ToolContext, category: str | None = None, limit: int = 5
) -> dict[str, Any]:
    """Get the latest news items from the configured news feeds, newest first.

    Args:
        category: a news category from the configuration; all feeds when omitted.
        limit: how many items to return, 1 to 20.
    """
    if not 1 <= limit <= 20:
        raise ToolError(f"limit {limit} is out of range; use 1 to 20")
    config = ctx.deps.settings.news
    if category and category.lower() in ("all", "*"):
        category = None
    if category and config.feeds and not any(c.upper() == category.upper() for c in config.feeds):
        raise ToolError(f"unknown category {category!r}; choose one of {list(config.feeds)}")
    urls = [
        u
        for c, feed in config.feeds.items()
        if not category or c.upper() == category.upper() or c in ("*", "all")
        for u in feed
    ]
    urls = list(dict.fromkeys(urls))  # a feed listed under two categories is read once
    async with asyncio.TaskGroup() as group:
        reads = [group.create_task(_read(ctx, u)) for u in urls]
    items: list[dict[str, Any]] = []
    problems: list[str] = []
    for read in reads:
        result = read.result()
        if isinstance(result, Unreachable):
            problems.append(str(result))
        else:
            items.extend(result)
    if items:
        oldest = datetime.min.replace(tzinfo=UTC)
        items.sort(key=lambda i: i["_sort"] or oldest, reverse=True)
        news = [{k: v for k, v in i.items() if k != "_sort"} for i in items[:limit]]
        return {
            "success": True,
            "category": category or "all",
            "news": news,
            "message": f"{len(news)} news items from the configured feeds",
        }
    if problems:
        log.info("fetch_news: no feed reachable: %s", "; ".join(problems))
    sources = [{"name": n, "url": u} for n, u in config.official_sources.items()]
    return {
        "success": bool(config.static_items),
        "category": category or "all",
        "news": _static(config, category, limit),
        "is_static": True,
        "message": (
            "No live news is available"
            + (f" ({problems[0]})" if problems else "")
            + ". These are stored reference items, not current news; point the user to "
            "the official sources for the latest."
        ),
        "official_sources": sources,
    }
