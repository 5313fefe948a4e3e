"""Scheduled messages: the desk that adds them, the runner that fires each occurrence once."""
