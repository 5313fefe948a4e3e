"""The `get_exchange_rate` tool: live rates from a configured API, else an estimate, said so."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from tools.base import ToolContext, ToolError
from tools.builtin.http import Unreachable, fetch_json
from tools.registry import tool
from tools.settings import ExchangeRateSettings

log = logging.getLogger(__name__)

_CODE = re.compile(r"^[A-Z]{3}$")


def _code(value: str, what: str) -> str:
    code = value.strip().upper()
    if not _CODE.match(code):
        raise ToolError(
            f"{what} {value!r} is not an ISO 4217 code; use three letters like USD, EUR, CNY"
        )
    return code


def fallback_rate(table: Mapping[str, float], src: str, dst: str) -> float | None:
    """`src`->`dst` from "FROM/TO" entries: direct, inverted, or across one shared currency."""
    rates: dict[tuple[str, str], float] = {}
    for pair, rate in table.items():
        a, _, b = pair.upper().partition("/")
        if rate > 0:
            rates[(a, b)] = rate
            rates.setdefault((b, a), 1 / rate)
    if src == dst:
        return 1.0
    if (src, dst) in rates:
        return rates[(src, dst)]
    for (a, via), first in rates.items():
        if a == src and (via, dst) in rates:
            return first * rates[(via, dst)]
    return None


async def _live_rates(
    ctx: ToolContext, config: ExchangeRateSettings, base: str
) -> tuple[dict[str, float], str | None]:
    cache = ctx.deps.rates
    hit = cache.get(base)
    if hit is not None and time.monotonic() - hit[0] < config.cache_s:
        return hit[1], hit[2]
    if not config.url:
        raise Unreachable("no exchange rate API is configured (tools.exchange_rate.url)")
    if "{key}" in config.url and not config.api_key:
        raise Unreachable("the exchange rate API needs a key; set EXCHANGE_RATE_API_KEY")
    url = config.url.format(base=base, key=config.api_key)
    body = await fetch_json(ctx, url)
    rates = body.get("rates") or body.get("conversion_rates") if isinstance(body, dict) else None
    if not isinstance(rates, dict) or not rates or body.get("result") == "error":
        raise Unreachable(f"the exchange rate API sent no rates for {base}")
    clean = {str(k).upper(): float(v) for k, v in rates.items() if isinstance(v, int | float)}
    updated = body.get("time_last_update_utc") or body.get("date")
    cache[base] = (time.monotonic(), clean, updated)
    return clean, updated


@tool(read_only=True)
async def get_exchange_rate(
    ctx: ToolContext, from_: str, to: str, amount: float | None = None
) -> dict[str, Any]:
    """Convert between currencies at today's rate; says so when the rate is only an estimate.

    Args:
        from_: ISO 4217 code of the source currency, e.g. USD, CNY, HKD.
        to: ISO 4217 code of the target currency.
        amount: how much of the source currency to convert; omit for the rate alone.
    """
    src, dst = _code(from_, "from"), _code(to, "to")
    config = ctx.deps.settings.exchange_rate
    result: dict[str, Any] = {"success": True, "from": src, "to": dst}
    try:
        rates, updated = await _live_rates(ctx, config, src)
        if dst not in rates:
            raise ToolError(f"the rate source has no rate for {dst}; check the currency code")
        rate = rates[dst]
        result |= {"rate": rate, "is_estimate": False, "last_update": updated}
    except Unreachable as exc:
        log.info("exchange rate: %s; using the fallback table", exc)
        estimate = fallback_rate(config.fallback_rates, src, dst)
        if estimate is None:
            known = sorted({c for pair in config.fallback_rates for c in pair.upper().split("/")})
            raise ToolError(
                f"live rates are unavailable ({exc}) and there is no reference rate for "
                f"{src}/{dst}; reference rates exist for {known}"
            ) from None
        rate = round(estimate, 6)
        result |= {"rate": rate, "is_estimate": True, "note": f"live rates unavailable: {exc}"}
    if amount is not None:
        result |= {"amount": amount, "converted_amount": round(amount * rate, 2)}
    approx = "≈" if result["is_estimate"] else "="
    converted = (
        f"{amount:g} {src} {approx} {amount * rate:,.2f} {dst}; " if amount is not None else ""
    )
    kind = "reference rate, may be out of date" if result["is_estimate"] else "live rate"
    result["message"] = f"{converted}1 {src} {approx} {rate:g} {dst} ({kind})"
    return result
