"""Reports read from the store: `bot usage` and `bot sessions`."""
