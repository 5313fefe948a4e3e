"""The Lua scripts of `RedisEventHub`: numbering, keeping and forgetting frames atomically.

Per conversation C (`<p>hub:C`): `:seq` the last seq, `:s` a stream of kept frames whose entry
id is `<seq>-0` (so a resume is an XRANGE by seq), `:slots` which entry holds each message's
latest state (an update superseded by a later one is XDELed; its field '' holds the floor: the
highest seq trimmed past `replay_events`), `:where` how many sockets each
process has attached (a hash: process id -> count; gone when none is). `<p>hub:idle` orders conversations with no socket by last use; past
`max_idle` the oldest are deleted whole (their keys are built here: standalone Redis, not
Cluster). Publishing also PUBLISHes the frame on `<p>hub:C`, inside the script, so every
process receives frames in seq order; but only if another process than the publisher has a
socket attached: the publisher hands its own sockets the frame itself, and receiving its own
frames back (to skip them) cost it more CPU than the rest of publishing.
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

# Frames published in one call (what a process published while its last call was in flight).
# KEYS: idle clock, then per frame: seq stream slots where once
# ARGV: replay_events ttl_ms max_idle base me (the publisher's process id; '': publish always),
#       then per frame: head (the frame up to its seq)
#       slot conversation clears ("1": a `conversation.cleared` frame: nothing kept before it
#       is replayed) -> the seq of each frame
# `once` names a frame: a call retried after a lost reply returns the seq each frame got, and
# publishes nothing twice.
PUBLISH: Final = (
    _TRIM
    + """
local keep, ttl, max_idle, base = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local me = ARGV[5]
local seqs = {}
for i = 0, (#KEYS - 2) / 5 - 1 do
  local k, a = 2 + 5 * i, 5 + 4 * i
  local conversation = ARGV[a + 3]
  local done = redis.call('GET', KEYS[k + 5])
  if done then
    seqs[#seqs + 1] = tonumber(done)
  else
    local seq = redis.call('INCR', KEYS[k + 1])
    seqs[#seqs + 1] = seq
    redis.call('SET', KEYS[k + 5], seq, 'PX', 60000)
    local frame = ARGV[a + 1] .. seq .. '}'
    if ARGV[a + 4] == '1' then
      redis.call('DEL', KEYS[k + 2], KEYS[k + 3])
    end
    if keep > 0 then
      local slot = ARGV[a + 2]
      if slot ~= '' then
        local old = redis.call('HGET', KEYS[k + 3], slot)
        if old then redis.call('XDEL', KEYS[k + 2], old .. '-0') end
        redis.call('HSET', KEYS[k + 3], slot, seq)
        redis.call('PEXPIRE', KEYS[k + 3], ttl)
      end
      local kept = redis.call('XLEN', KEYS[k + 2])
      if kept >= keep then
        local gone = redis.call('XRANGE', KEYS[k + 2], '-', '+', 'COUNT', kept - keep + 1)
        redis.call('HSET', KEYS[k + 3], '', string.match(gone[#gone][1], '^%d+'))
        redis.call('PEXPIRE', KEYS[k + 3], ttl)
      end
      redis.call('XADD', KEYS[k + 2], 'MAXLEN', keep, seq .. '-0', 'f', frame)
      redis.call('PEXPIRE', KEYS[k + 2], ttl)
    end
    redis.call('PEXPIRE', KEYS[k + 1], ttl)
    local watching = redis.call('HLEN', KEYS[k + 4])
    if watching > redis.call('HEXISTS', KEYS[k + 4], me) then
      redis.call('PUBLISH', base .. conversation, frame)
    end
    if watching > 0 then
      redis.call('ZREM', KEYS[1], conversation)
    else
      redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), conversation)
      trim_idle(KEYS[1], max_idle, base)
    end
  end
end
return seqs
"""
)

# KEYS: seq stream where idle slots; ARGV: resume_after (-1: none) ttl_ms conversation me
# -> {seq, floor, frame, frame, ...}: the seq now, the floor and the kept frames after resume_after
ATTACH: Final = """
redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
redis.call('PEXPIRE', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[3])
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
local out = {seq, tonumber(redis.call('HGET', KEYS[5], '') or '0')}
local after = tonumber(ARGV[1])
if after >= 0 and after < seq then
  for _, entry in ipairs(redis.call('XRANGE', KEYS[2], (after + 1) .. '-0', seq .. '-0')) do
    out[#out + 1] = entry[2][2]
  end
end
return out
"""

# KEYS: where; ARGV: me count ttl_ms -- this process's sockets, set again if Redis lost them
PRESENT: Final = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
"""

# KEYS: where idle clock; ARGV: conversation max_idle base me
DETACH: Final = (
    _TRIM
    + """
if redis.call('HINCRBY', KEYS[1], ARGV[4], -1) <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[4])
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[1])
  trim_idle(KEYS[2], tonumber(ARGV[2]), ARGV[3])
end
return 1
"""
)
