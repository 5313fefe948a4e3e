"""The Lua scripts of `RedisConversations`; every one that changes a conversation is fenced.

Per conversation C (`<p>q:C`): `:in` the queued messages (a list), `:lock` the lease (its value
the fencing token), `:fence` the token counter, `:turn` the batch of the turn running now (so a
process that takes over a dead holder's lease finds it), `:stop` a stop asked for the running
turn. `<p>q:ready` is the stream of "C has work" entries a consumer group shares, and
`<p>q:busy` the conversations with work queued or running.
"""

from __future__ import annotations

from typing import Final

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

# KEYS: in lock stop busy; ARGV: conversation stop_ms channel -> {dropped, running, messages}
STOP: Final = """
local queued = redis.call('LRANGE', KEYS[1], 0, -1)
local dropped = #queued
redis.call('DEL', KEYS[1])
local running = redis.call('EXISTS', KEYS[2])
if running == 1 then
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], ARGV[1])
else
  redis.call('ZREM', KEYS[4], ARGV[1])
end
return {dropped, running, queued}
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

# The hot path: a turn is one round trip (NEXT) after the one that queued its message (ENQUEUE,
# which takes the lease and the message when the conversation was idle). It was eleven: queue, a
# reader's XREADGROUP, acquire, GET turn + LRANGE in, take, finish, GET + LRANGE, release, XACK.
# KEYS: lock fence in turn stop busy ready [once]
# ARGV: token lease_ms conversation entry_id group max_queued flag finished_batch
#       [message consumer once_ms]
# look(entry) -> {1} let go (and the entry acked), {2, batch} a recorded batch (a dead holder's),
#   {3, message, batch} the one queued message taken (a batch of one is always that message),
#   {4, queued...} several queued: the caller picks a batch and TAKEs it.
_LOOK: Final = """
local function look(entry)
  local recorded = redis.call('GET', KEYS[4])
  if recorded then return {2, recorded} end
  local n = redis.call('LLEN', KEYS[3])
  if n == 0 then
    redis.call('DEL', KEYS[1])
    -- the token is spent: a heartbeat of this holder still in flight must not take the lock back
    redis.call('INCR', KEYS[2])
    redis.call('ZREM', KEYS[6], ARGV[3])
    redis.call('XACK', KEYS[7], ARGV[5], entry)
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

-- Take the lease for a "has work" entry, and look (flag "look") or not (flag "wait": the caller
-- coalesces a burst first, then calls NEXT). Held by another process -> {0}, and the entry is
-- acked unless it was reclaimed (flag "reclaimed": its holder's lease decides). Otherwise
-- {token, <what look returned>...}.
local function claim(entry)
  if redis.call('EXISTS', KEYS[1]) == 1 then
    if ARGV[7] ~= 'reclaimed' then redis.call('XACK', KEYS[7], ARGV[5], entry) end
    return {0}
  end
  local token = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
  if ARGV[7] == 'wait' then return {token} end
  local out = look(entry)
  table.insert(out, 1, token)
  return out
end
"""

CLAIM: Final = _LOOK + "return claim(ARGV[4])"

# Queue a message -> {0} the queue is full, {-1} `once` was set (an earlier attempt whose reply
# was lost queued it, or `once` is the dedup claim of an event seen already: nothing queued),
# {1} queued, {2, entry_id, conversation, <what claim returned>...}
# queued, and this process (ARGV consumer, "" for none) read a "has work" entry and claimed
# it if it is this conversation's ({2, id, other, 0}: another's; the caller CLAIMs it).
ENQUEUE: Final = (
    _LOOK
    + """
if redis.call('EXISTS', KEYS[8]) == 1 then return {-1} end
if redis.call('LLEN', KEYS[3]) >= tonumber(ARGV[6]) then return {0} end
redis.call('SET', KEYS[8], '1', 'PX', ARGV[11])
redis.call('RPUSH', KEYS[3], ARGV[9])
redis.call('ZADD', KEYS[6], 0, ARGV[3])
-- a holder drains what is queued before it lets go (NEXT checks), so no entry is needed then
if redis.call('EXISTS', KEYS[1]) == 1 then return {1} end
redis.call('XADD', KEYS[7], 'MAXLEN', '~', 100000, '*', 'c', ARGV[3])
if ARGV[10] == '' then return {1} end
-- This process reads an entry itself (most often the one just added: the readers keep up), so
-- the turn runs where its message arrived, without a reader's round trip. No group yet (Redis
-- restarted empty): the reader creates it and reads the entry then.
local read = redis.pcall('XREADGROUP', 'GROUP', ARGV[5], ARGV[10], 'COUNT', 1, 'STREAMS', KEYS[7], '>')
if type(read) ~= 'table' or read.err or not read[1] then return {1} end
local entry = read[1][2][1]
if entry[2][2] ~= ARGV[3] then return {2, entry[1], entry[2][2], 0} end
local out = claim(entry[1])
table.insert(out, 1, entry[2][2])
table.insert(out, 1, entry[1])
table.insert(out, 1, 2)
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
return look(ARGV[4])
"""
)
