"""The sessions API channel: REST + Server-Sent Events under /api/v1 for sites and apps."""
