"""The Lua scripts of `RedisRateBudget`: one EVALSHA per attempt, on the server's clock.

Keys of an own scope S: `S:busy` (the holder's token, a lease), `S:free` (not before, ms),
`S:q` (waiting finals and sends, scored rank then arrival), `S:seen` (when each waiter last
asked: a waiter whose process died stops asking and is dropped). Keys of a shared scope R:
`R:tat` (the GCRA's theoretical arrival time, ms), `R:free` (a 429 penalty), `R:held` (finals and
sends sleeping until R allows them, with when that ends, so previews elsewhere yield R to them).
A scope is one name for both roles, as in the local budget: a penalty on it delays both.
"""

from __future__ import annotations

from typing import Final

_COMMON: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local function num(key) return tonumber(redis.call('GET', key) or '0') or 0 end
local function set_until(key, value, margin)
  redis.call('SET', key, string.format('%.3f', value), 'PX', math.ceil(value - now + margin))
end
"""

# KEYS: busy free q seen arrivals, then per rate: tat free held
# ARGV: mode (preview|wait) token rank interval_ms lease_ms stale_ms, then per rate: emission_ms burst
# -> {1, 0} taken; {0, ms} not before ms from now; {2, 0} another call holds or comes first
ACQUIRE: Final = (
    _COMMON
    + """
local mode, token = ARGV[1], ARGV[2]
local interval, lease, stale = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local nrates = (#KEYS - 5) / 3
if mode == 'wait' then
  if not redis.call('ZSCORE', KEYS[3], token) then
    local n = redis.call('INCR', KEYS[5])
    redis.call('ZADD', KEYS[3], tonumber(ARGV[3]) * 1e12 + n, token)
  end
  redis.call('HSET', KEYS[4], token, string.format('%.3f', now))
  redis.call('PEXPIRE', KEYS[3], lease + stale)
  redis.call('PEXPIRE', KEYS[4], lease + stale)
end
local seen = redis.call('HGETALL', KEYS[4])
for i = 1, #seen, 2 do
  if tonumber(seen[i + 1]) < now - stale then
    redis.call('ZREM', KEYS[3], seen[i])
    redis.call('HDEL', KEYS[4], seen[i])
  end
end
local own = num(KEYS[2]) - now
local delay = own
local shared = {}
for i = 1, nrates do
  local k = 5 + (i - 1) * 3
  local em, burst = tonumber(ARGV[6 + 2 * i - 1]), tonumber(ARGV[6 + 2 * i])
  local d = math.max(num(KEYS[k + 1]) - (burst - 1) * em - now, num(KEYS[k + 2]) - now)
  shared[i] = d
  if d > delay then delay = d end
end
local function take()
  redis.call('SET', KEYS[1], token, 'PX', lease)
  for i = 1, nrates do
    local k = 5 + (i - 1) * 3
    local tat = math.max(num(KEYS[k + 1]), now) + tonumber(ARGV[6 + 2 * i - 1])
    set_until(KEYS[k + 1], tat, 1000)
  end
end
if mode == 'preview' then
  if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('ZCARD', KEYS[3]) > 0 then
    return {0, tostring(math.max(delay, 0) + interval)}
  end
  for i = 1, nrates do
    local k = 5 + (i - 1) * 3
    redis.call('ZREMRANGEBYSCORE', KEYS[k + 3], '-inf', now)
    local held = redis.call('ZCARD', KEYS[k + 3])
    if held > 0 then
      delay = math.max(delay, shared[i] + held * tonumber(ARGV[6 + 2 * i - 1]))
    end
  end
  if delay > 0 then return {0, tostring(delay)} end
  take()
  return {1, '0'}
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {2, '0'} end
local head = redis.call('ZRANGE', KEYS[3], 0, 0)
if head[1] ~= token then return {2, '0'} end
if delay > 0 then
  for i = 1, nrates do
    if shared[i] > 0 and shared[i] >= own then
      local k = 5 + (i - 1) * 3
      redis.call('ZADD', KEYS[k + 3], now + shared[i] + 50, token)
      redis.call('PEXPIRE', KEYS[k + 3], math.ceil(shared[i]) + stale)
    end
  end
  return {0, tostring(delay)}
end
redis.call('ZREM', KEYS[3], token)
redis.call('HDEL', KEYS[4], token)
for i = 1, nrates do redis.call('ZREM', KEYS[5 + (i - 1) * 3 + 3], token) end
take()
return {1, '0'}
"""
)

# KEYS: busy free; ARGV: token interval_ms
RELEASE: Final = (
    _COMMON
    + """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
local free = math.max(num(KEYS[2]), now + tonumber(ARGV[2]))
if free > now then set_until(KEYS[2], free, 1000) end
return 1
"""
)

# KEYS: q seen, then every rate's held; ARGV: token
CANCEL: Final = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
for i = 3, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
return 1
"""

# KEYS: free; ARGV: retry_after_ms
PENALIZE: Final = (
    _COMMON
    + """
local free = math.max(num(KEYS[1]), now + tonumber(ARGV[1]))
if free > now then set_until(KEYS[1], free, 1000) end
return 1
"""
)
