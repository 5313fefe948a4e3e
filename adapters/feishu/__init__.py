"""The Feishu/Lark channel (lark-oapi): long connection or HTTP callbacks, CardKit streaming cards."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters.feishu.channel import FeishuChannel

__all__ = ["FeishuChannel"]


def __getattr__(name: str) -> Any:
    # Lazy: lark_oapi takes seconds to import, and `adapters.feishu.config` must not pay for it.
    if name == "FeishuChannel":
        from adapters.feishu.channel import FeishuChannel

        return FeishuChannel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
