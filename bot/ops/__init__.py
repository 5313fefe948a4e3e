"""What the operator sees of a running gateway: /metrics, /readyz, /healthz, the admin view."""
