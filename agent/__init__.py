"""The agent runtime: coordinator loop, personas, model providers."""
