"""The gateway's own code by job: runtime, pipeline, ops, reports; the backends storage, redis."""
