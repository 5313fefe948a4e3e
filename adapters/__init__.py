"""Channel adapters: one module per platform, the vocabulary and Channel protocol in base.py."""
