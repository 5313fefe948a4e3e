"""The `web_search` tool: a configured backend (SearXNG, Brave, Google); never made-up hits."""

from __future__ import annotations

import logging
from typing import Any

from tools.base import ToolContext, ToolError
from tools.builtin.http import Unreachable, fetch_json
from tools.registry import tool
from tools.settings import WebSearchSettings

log = logging.getLogger(__name__)

BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
GOOGLE_URL = "https://www.googleapis.com/customsearch/v1"


def _items(body: Any, *path: str) -> list[dict[str, Any]]:
    """The list at `path` in a JSON answer; a body of another shape means the backend is broken."""
    for key in path:
        body = body.get(key) if isinstance(body, dict) else None
    if body is None:
        return []
    if not isinstance(body, list):
        raise Unreachable(
            f"the search backend sent an unexpected answer (no list at {'.'.join(path)})"
        )
    return [item for item in body if isinstance(item, dict)]


def _hit(title: Any, url: Any, snippet: Any) -> dict[str, str] | None:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    return {"title": str(title or url), "url": url, "snippet": str(snippet or "")}


async def _searxng(ctx: ToolContext, c: WebSearchSettings, q: str, lang: str | None) -> list[Any]:
    if not c.url:
        raise Unreachable("tools.web_search.url (the SearXNG address) is not set")
    params = {"q": q, "format": "json"} | ({"language": lang} if lang else {})
    body = await fetch_json(ctx, c.url.rstrip("/") + "/search", params=params)
    return [_hit(r.get("title"), r.get("url"), r.get("content")) for r in _items(body, "results")]


async def _brave(ctx: ToolContext, c: WebSearchSettings, q: str, lang: str | None) -> list[Any]:
    if not c.api_key:
        raise Unreachable("the Brave search API needs a key; set WEB_SEARCH_API_KEY")
    params = {"q": q, "count": str(c.max_results)} | ({"search_lang": lang} if lang else {})
    headers = {"X-Subscription-Token": c.api_key, "Accept": "application/json"}
    body = await fetch_json(ctx, c.url or BRAVE_URL, params=params, headers=headers)
    found = _items(body, "web", "results")
    return [_hit(r.get("title"), r.get("url"), r.get("description")) for r in found]


async def _google(ctx: ToolContext, c: WebSearchSettings, q: str, lang: str | None) -> list[Any]:
    if not c.api_key or not c.engine_id:
        raise Unreachable("Google search needs WEB_SEARCH_API_KEY and tools.web_search.engine_id")
    params = {"key": c.api_key, "cx": c.engine_id, "q": q, "num": str(min(c.max_results, 10))}
    if lang:
        params["hl"] = lang
    body = await fetch_json(ctx, c.url or GOOGLE_URL, params=params)
    return [_hit(r.get("title"), r.get("link"), r.get("snippet")) for r in _items(body, "items")]


BACKENDS = {"searxng": _searxng, "brave": _brave, "google": _google}


@tool(read_only=True)
async def web_search(
    ctx: ToolContext, query: str, site: str | None = None, language: str | None = None
) -> dict[str, Any]:
    """Search the web for current information; returns titles, URLs and snippets to cite.

    Args:
        query: what to search for, in the words a web page would use.
        site: limit results to one site, e.g. 'gov.uk'.
        language: preferred result language as a code such as 'en', 'de' or 'zh-CN'.
    """
    if not query.strip():
        raise ToolError("query is empty; say what to search for")
    config = ctx.deps.settings.web_search
    q = f"{query.strip()} site:{site.strip()}" if site and site.strip() else query.strip()
    search = BACKENDS.get(config.backend)
    try:
        if search is None:
            raise Unreachable("no search backend is configured (tools.web_search.backend)")
        found = await search(ctx, config, q, language)
    except Unreachable as exc:
        log.info("web_search unavailable: %s", exc)
        sites = [{"name": n, "url": u} for n, u in config.suggested_sites.items()]
        return {
            "success": False,
            "query": q,
            "results": [],
            "message": f"Web search is unavailable ({exc}). Do not guess results; "
            + ("suggest these sites instead." if sites else "say that search is unavailable."),
            "suggested_sites": sites,
        }
    results = [hit for hit in found if hit is not None][: config.max_results]
    return {
        "success": True,
        "query": q,
        "results": results,
        "result_count": len(results),
        "message": f"{len(results)} results" if results else "no results; try other words",
    }
