"""The Lua scripts of `RedisConversations`; every one that changes a conversation is fenced.

Per conversation C (`<p>q:C`): `:in` the queued messages (a list), `:lock` the lease (its value
the fencing token), `:fence` the token counter, `:turn` the batch of the turn running now (so a
process that takes over a dead holder's lease finds it), `:stop` a stop asked for the running
turn. `<p>q:ready` is the stream of "C has work" entries a consumer group shares, and
`<p>q:busy` the conversations with work queued or running.
"""

from __future__ import annotations

from typing import Final

# KEYS: in lock ready busy once; ARGV: message max_queued conversation ttl_ms
# -> 1 queued (now or by an earlier attempt whose reply was lost: `once` names the event), 0 full
ENQUEUE: Final = """
if redis.call('EXISTS', KEYS[5]) == 1 then return 1 end
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[5], '1', 'PX', ARGV[4])
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[4], 0, ARGV[3])
-- a holder drains what is queued before it lets go (RELEASE checks), so no entry is needed then
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', 100000, '*', 'c', ARGV[3])
end
return 1
"""

# KEYS: lock fence; ARGV: lease_ms -> the fencing token, or 0 when another process holds it
ACQUIRE: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token, 'PX', ARGV[1])
return token
"""

# The lease is still this holder's if it holds the lock, or if the lock lapsed (Redis was
# unreachable, the process stalled) and nobody took it since: the fence counter still names this
# token. Then the lock is set again. KEYS[1] lock, KEYS[2] fence; ARGV[1] token, ARGV[2] lease_ms.
_MINE: Final = """
local function mine()
  local holder = redis.call('GET', KEYS[1])
  if holder == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return true
  end
  if holder == false and redis.call('GET', KEYS[2]) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return true
  end
  return false
end
"""

# KEYS: lock fence stop; ARGV: token lease_ms -> 0 lost, 1 held, 2 held and a stop was asked
EXTEND: Final = (
    _MINE
    + """
if not mine() then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 2 end
return 1
"""
)

# KEYS: lock fence in turn stop; ARGV: token lease_ms batch n index1 message1 index2 message2 ...
# -> 1 taken, 0 lease lost, -1 the queue changed under us (a /stop): look again
TAKE: Final = (
    _MINE
    + """
if not mine() then return 0 end
local n = tonumber(ARGV[4])
for i = 0, n - 1 do
  if redis.call('LINDEX', KEYS[3], ARGV[5 + 2 * i]) ~= ARGV[6 + 2 * i] then return -1 end
end
for i = 0, n - 1 do redis.call('LSET', KEYS[3], ARGV[5 + 2 * i], '\\0taken') end
redis.call('LREM', KEYS[3], 0, '\\0taken')
redis.call('SET', KEYS[4], ARGV[3])
redis.call('DEL', KEYS[5])
return 1
"""
)

# KEYS: lock fence turn; ARGV: token lease_ms -> 1 done, 0 lease lost
FINISH: Final = (
    _MINE
    + """
if not mine() then return 0 end
redis.call('DEL', KEYS[3])
return 1
"""
)

# KEYS: lock fence in turn busy; ARGV: token lease_ms conversation
# -> 1 let go (or another holder drains), 0 work left: keep draining
RELEASE: Final = (
    _MINE
    + """
if not mine() then return 1 end
if redis.call('LLEN', KEYS[3]) > 0 or redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
redis.call('DEL', KEYS[1])
-- the token is spent: a heartbeat of this holder still in flight must not take the lock back
redis.call('INCR', KEYS[2])
redis.call('ZREM', KEYS[5], ARGV[3])
return 1
"""
)

# KEYS: in lock stop busy; ARGV: conversation stop_ms channel -> {dropped, running}
STOP: Final = """
local dropped = redis.call('LLEN', KEYS[1])
redis.call('DEL', KEYS[1])
local running = redis.call('EXISTS', KEYS[2])
if running == 1 then
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], ARGV[1])
else
  redis.call('ZREM', KEYS[4], ARGV[1])
end
return {dropped, running}
"""

# KEYS: lock in turn ready fence; ARGV: token conversation -> 1
# Shutdown: let go now, so another process takes what is queued at once.
ABANDON: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('INCR', KEYS[5])
if redis.call('LLEN', KEYS[2]) > 0 then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', 100000, '*', 'c', ARGV[2])
end
return 1
"""

# The drain's hot path, one round trip per turn (NEXT) plus one to start (CLAIM), where it was
# GET turn, LRANGE in, TAKE, FINISH, GET, LRANGE, RELEASE and XACK around ACQUIRE.
# KEYS: lock fence in turn stop busy ready
# ARGV: token lease_ms conversation entry_id group max_queued flag finished_batch
# -> {1} let go (and the entry acked), {2, batch} a recorded batch (a dead holder's), {3, message,
#    batch} the one queued message taken (a batch of one is always that message), {4, queued...}
#    several queued: the caller picks a batch and TAKEs it.
_LOOK: Final = """
local function look()
  local recorded = redis.call('GET', KEYS[4])
  if recorded then return {2, recorded} end
  local n = redis.call('LLEN', KEYS[3])
  if n == 0 then
    redis.call('DEL', KEYS[1])
    redis.call('INCR', KEYS[2])  -- the token is spent (see RELEASE)
    redis.call('ZREM', KEYS[6], ARGV[3])
    redis.call('XACK', KEYS[7], ARGV[5], ARGV[4])
    return {1}
  end
  if n == 1 then
    local message = redis.call('LPOP', KEYS[3])
    local batch = '[' .. cjson.encode(message) .. ']'
    redis.call('SET', KEYS[4], batch)
    redis.call('DEL', KEYS[5])
    return {3, message, batch}
  end
  local queued = redis.call('LRANGE', KEYS[3], 0, tonumber(ARGV[6]) - 1)
  table.insert(queued, 1, 4)
  return queued
end
"""

# CLAIM: take the lease for a "has work" entry, and look (flag "look") or not (flag "wait": the
# caller coalesces a burst first, then calls NEXT). Held by another process -> {0}, and the entry
# is acked unless it was reclaimed (flag "reclaimed": its holder's lease decides). Otherwise
# {token, <what look returned>...}.
CLAIM: Final = (
    _LOOK
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if ARGV[7] ~= 'reclaimed' then redis.call('XACK', KEYS[7], ARGV[5], ARGV[4]) end
  return {0}
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
if ARGV[7] == 'wait' then return {token} end
local out = look()
table.insert(out, 1, token)
return out
"""
)

# NEXT: the turn of `finished_batch` (the recorded batch's exact text, "" for none) is answered:
# forget it, then look. Comparing the text makes a retry after a lost reply harmless: the first
# attempt's next batch is not forgotten. -> {0} the lease was lost, else what look returned.
NEXT: Final = (
    _MINE
    + _LOOK
    + """
if not mine() then return {0} end
if ARGV[8] ~= '' and redis.call('GET', KEYS[4]) == ARGV[8] then redis.call('DEL', KEYS[4]) end
return look()
"""
)
