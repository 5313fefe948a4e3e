"""Composition root: CLI, config, app wiring, gateway, delivery, storage."""
