"""Built-in tools, and the registry that holds them."""

from __future__ import annotations

from tools.builtin.clock import get_current_datetime
from tools.registry import ToolRegistry


def builtin_registry() -> ToolRegistry:
    """A fresh registry with every built-in tool; add control and app tools to it as needed."""
    return ToolRegistry([get_current_datetime])
