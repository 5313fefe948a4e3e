"""Several gateway processes over Redis (`redis.url`): each seam's Redis implementation.

dedup.py `RedisDedup` · budget.py `RedisRateBudget` · hub.py `RedisEventHub` ·
conversations.py `RedisConversations` · leader.py `RedisLeader` · client.py the shared client.
Each passes its seam's contract test (tests/test_*_contract.py) against a real Redis.
"""
