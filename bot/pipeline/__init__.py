"""A message's way to an answer: dedup, access, quotas, queue, turn, delivery, resumption."""
