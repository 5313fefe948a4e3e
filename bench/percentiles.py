"""The percentile the platform benchmarks print: of values already sorted, in milliseconds."""

from __future__ import annotations


def ms(values: list[float], q: float, digits: int = 1) -> str:
    """The `q` quantile (1.0: the largest) of sorted seconds, as milliseconds; "-" for none."""
    if not values:
        return "-"
    return f"{values[min(len(values) - 1, int(q * len(values)))] * 1000:.{digits}f}"
