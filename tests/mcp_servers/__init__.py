"""MCP servers written with the SDK's server API, run as real children by the MCP tests."""
