"""MCP tool servers as tool sources: one supervised connection per configured server."""
