"""Tool registry, ToolContext, control tools and built-in tools."""
