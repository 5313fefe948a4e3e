"""The `fetch_news` tool: items from configured RSS/Atom feeds, else configured reference items."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from xml.etree.ElementTree import Element

from tools.base import ToolContext, ToolError
from tools.builtin.http import Unreachable, fetch
from tools.builtin.settings import NewsSettings, settings
from tools.registry import tool

try:  # refuses entity expansion bombs; the stdlib parser is the fallback
    from defusedxml.ElementTree import ParseError, fromstring
except ImportError:  # pragma: no cover - defusedxml is a dependency
    # only the optional arguments differ, and parse_feed passes none
    from xml.etree.ElementTree import ParseError, fromstring  # type: ignore[assignment]

log = logging.getLogger(__name__)

_ATOM = "{http://www.w3.org/2005/Atom}"
_TAGS = re.compile(r"<[^>]+>")
SUMMARY_CHARS = 300


def _text(node: Element | None) -> str:
    if node is None:
        return ""
    raw = "".join(node.itertext())
    return " ".join(_TAGS.sub(" ", raw).split())


def _when(value: str) -> datetime | None:
    value = value.strip()
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value)  # RSS: RFC 822
    except (TypeError, ValueError):
        try:
            parsed = datetime.fromisoformat(value)  # Atom: RFC 3339
        except ValueError:
            return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_feed(body: bytes, source: str) -> list[dict[str, Any]]:
    """Items of an RSS 2.0 or Atom document: title, url, summary, date, source."""
    try:
        root = fromstring(body)
    except (ParseError, ValueError) as exc:  # defusedxml raises ValueError subclasses
        raise Unreachable(f"{source} did not send a valid RSS or Atom feed") from exc
    items = []
    if root.tag == f"{_ATOM}feed":
        feed_title = _text(root.find(f"{_ATOM}title")) or source
        for entry in root.iter(f"{_ATOM}entry"):
            link = next(
                (
                    el.get("href", "")
                    for el in entry.findall(f"{_ATOM}link")
                    if el.get("rel", "alternate") == "alternate"
                ),
                "",
            )
            summary_el = entry.find(f"{_ATOM}summary")
            if summary_el is None:
                summary_el = entry.find(f"{_ATOM}content")
            date = _text(entry.find(f"{_ATOM}updated")) or _text(entry.find(f"{_ATOM}published"))
            items.append(
                (_text(entry.find(f"{_ATOM}title")), link, _text(summary_el), date, feed_title)
            )
    else:
        channel = root.find("channel")
        feed_title = _text(channel.find("title")) if channel is not None else source
        for item in root.iter("item"):
            date = _text(item.find("pubDate"))
            items.append(
                (
                    _text(item.find("title")),
                    _text(item.find("link")),
                    _text(item.find("description")),
                    date,
                    feed_title or source,
                )
            )
    out = []
    for title, link, summary, date, origin in items:
        if not title:
            continue
        when = _when(date)
        out.append(
            {
                "title": title,
                "url": link,
                "summary": summary[:SUMMARY_CHARS],
                "date": when.isoformat() if when else date,
                "source": origin,
                "_sort": when,
            }
        )
    return out


async def _read(ctx: ToolContext, url: str) -> list[dict[str, Any]] | Unreachable:
    try:
        body = await fetch(ctx, url)
        # parsing a 2 MB feed takes a few hundred ms: off the loop, so other chats keep moving
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


@tool
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
    config = settings(ctx).news
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
