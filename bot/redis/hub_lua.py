"""The Lua scripts of `RedisEventHub`: numbering, keeping and forgetting frames atomically.

Per conversation C (`<p>hub:C`): `:seq` the last seq, `:s` a stream of kept frames whose entry
id is `<seq>-0` (so a resume is an XRANGE by seq), `:slots` which entry holds each message's
latest state (an update superseded by a later one is XDELed), `:live` how many sockets are
attached anywhere. `<p>hub:idle` orders conversations with no socket by last use; past
`max_idle` the oldest are deleted whole (their keys are built here: standalone Redis, not
Cluster). Publishing also PUBLISHes the frame on `<p>hub:C`, inside the script, so every
process receives frames in seq order.
"""

from __future__ import annotations

from typing import Final

_TRIM: Final = """
local function trim_idle(idle, max_idle, base)
  while redis.call('ZCARD', idle) > max_idle do
    local gone = redis.call('ZPOPMIN', idle)
    local c = base .. gone[1]
    redis.call('DEL', c .. ':seq', c .. ':s', c .. ':slots')
  end
end
"""

# KEYS: seq stream slots live idle clock once
# ARGV: frame head (ends before the seq) slot replay_events ttl_ms max_idle conversation base
#       clears ("1": a `conversation.cleared` frame: nothing kept before it is replayed)
# `once` names this frame: a publish retried after a lost reply returns the seq it got, and
# publishes nothing twice.
PUBLISH: Final = (
    _TRIM
    + """
local done = redis.call('GET', KEYS[7])
if done then return tonumber(done) end
local seq = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[7], seq, 'PX', 60000)
local frame = ARGV[1] .. seq .. '}'
local keep, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
if ARGV[8] == '1' then
  redis.call('DEL', KEYS[2], KEYS[3])
end
if keep > 0 then
  if ARGV[2] ~= '' then
    local old = redis.call('HGET', KEYS[3], ARGV[2])
    if old then redis.call('XDEL', KEYS[2], old .. '-0') end
    redis.call('HSET', KEYS[3], ARGV[2], seq)
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
  redis.call('XADD', KEYS[2], 'MAXLEN', keep, seq .. '-0', 'f', frame)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PUBLISH', ARGV[7] .. ARGV[6], frame)
if tonumber(redis.call('GET', KEYS[4]) or '0') > 0 then
  redis.call('ZREM', KEYS[5], ARGV[6])
else
  redis.call('ZADD', KEYS[5], redis.call('INCR', KEYS[6]), ARGV[6])
  trim_idle(KEYS[5], tonumber(ARGV[5]), ARGV[7])
end
return seq
"""
)

# KEYS: seq stream live idle; ARGV: resume_after (-1: none) ttl_ms conversation
# -> {seq, frame, frame, ...}: the seq now and the kept frames after resume_after
ATTACH: Final = """
redis.call('INCR', KEYS[3])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[3])
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
local out = {seq}
local after = tonumber(ARGV[1])
if after >= 0 and after < seq then
  for _, entry in ipairs(redis.call('XRANGE', KEYS[2], (after + 1) .. '-0', seq .. '-0')) do
    out[#out + 1] = entry[2][2]
  end
end
return out
"""

# KEYS: live idle clock; ARGV: conversation max_idle base
DETACH: Final = (
    _TRIM
    + """
if redis.call('DECR', KEYS[1]) <= 0 then
  redis.call('DEL', KEYS[1])
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[1])
  trim_idle(KEYS[2], tonumber(ARGV[2]), ARGV[3])
end
return 1
"""
)
