"""The Lua scripts of `RedisConversations`; every one that changes a conversation is fenced.

Per conversation C (`<p>q:C`): `:in` the queued messages (a list), `:lock` the lease (its value
the fencing token), `:fence` the token counter, `:turn` the batch of the turn running now (so a
process that takes over a dead holder's lease finds it), `:stop` a stop asked for the running
turn. `<p>q:ready` is the stream of "C has work" entries a consumer group shares, and
`<p>q:busy` the conversations with work queued or running.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "workers"  # the consumer group sharing `<p>q:ready` (the scripts' argument 5)

# The scripts below read a message's keys and arguments through K and A: KEYS and ARGV, or in
# ENQUEUE one message's group of them (a call queues several).
_BIND: Final = "local K, A = KEYS, ARGV\n"

# The lease is still this holder's if it holds the lock, or if the lock lapsed (Redis was
# unreachable, the process stalled) and nobody took it since: the fence counter still names this
# token. Then the lock is set again. KEYS[1] lock, KEYS[2] fence; ARGV[1] token, ARGV[2] lease_ms.
_MINE: Final = """
local function mine()
  local holder = redis.call('GET', K[1])
  if holder == A[1] then
    redis.call('PEXPIRE', K[1], A[2])
    return true
  end
  if holder == false and redis.call('GET', K[2]) == A[1] then
    redis.call('SET', K[1], A[1], 'PX', A[2])
    return true
  end
  return false
end
"""

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
# KEYS: lock fence in turn stop busy ready state (ENQUEUE: ... ready once state)
# ARGV: token lease_ms conversation entry_id group max_queued flag finished_batch
#       [message consumer once_ms]
# look(entry, state) -> {1} let go (and the entry acked), {2, batch, S} a recorded batch (a dead
#   holder's), {3, message, batch, S} the one queued message taken (a batch of one is always that
#   message), {4, queued..., S} several queued: the caller picks a batch and TAKEs it. S is the
#   conversation's state hash (bot/redis/states.py) as HGETALL gives it: the turn's own read of
#   it, in the call that hands it its messages (the state as of then) instead of one of its own.
_LOOK: Final = """
local function look(entry, state)
  local recorded = redis.call('GET', K[4])
  if recorded then return {2, recorded, redis.call('HGETALL', state)} end
  local n = redis.call('LLEN', K[3])
  if n == 0 then
    redis.call('DEL', K[1])
    -- the token is spent: a heartbeat of this holder still in flight must not take the lock back
    redis.call('INCR', K[2])
    redis.call('ZREM', K[6], A[3])
    redis.call('XACK', K[7], A[5], entry)
    return {1}
  end
  if n == 1 then
    local message = redis.call('LPOP', K[3])
    local batch = '[' .. cjson.encode(message) .. ']'
    redis.call('SET', K[4], batch)
    redis.call('DEL', K[5])
    return {3, message, batch, redis.call('HGETALL', state)}
  end
  local queued = redis.call('LRANGE', K[3], 0, tonumber(A[6]) - 1)
  table.insert(queued, 1, 4)
  queued[#queued + 1] = redis.call('HGETALL', state)
  return queued
end

-- Take the lease for a "has work" entry, and look (flag "look") or not (flag "wait": the caller
-- coalesces a burst first, then calls NEXT). Held by another process -> {0}, and the entry is
-- acked unless it was reclaimed (flag "reclaimed": its holder's lease decides). Otherwise
-- {token, <what look returned>...}.
local function claim(entry, state)
  if redis.call('EXISTS', K[1]) == 1 then
    if A[7] ~= 'reclaimed' then redis.call('XACK', K[7], A[5], entry) end
    return {0}
  end
  local token = redis.call('INCR', K[2])
  redis.call('SET', K[1], token, 'PX', A[2])
  if A[7] == 'wait' then return {token} end
  local out = look(entry, state)
  table.insert(out, 1, token)
  return out
end
"""

CLAIM: Final = _BIND + _LOOK + "return claim(ARGV[4], KEYS[8])"

# Queue a message -> {0} the queue is full, {-1} `once` was set (an earlier attempt whose reply
# was lost queued it, or `once` is the dedup claim of an event seen already: nothing queued),
# {3, mode} `once` set but nothing queued: ARGV held is "1" and the conversation's state (KEYS
# state, bot/redis/states.py) has a mode other than bot (its handler takes the message),
# {1} queued, {2, entry_id, conversation, <what claim returned>...}
# queued, and this process (ARGV consumer, "" for none) read a "has work" entry and claimed
# it if it is this conversation's ({2, id, other, 0}: another's; the caller CLAIMs it).
# A call queues several messages (bot/redis/script_batch.py), one after the other as separate
# calls would: KEYS and ARGV are groups of ENQUEUE_KEYS and ENQUEUE_ARGS, one per message, and
# the reply is one of the above per message, in order, or {-2, error} if its script failed.
# KEYS: lock fence in turn stop busy ready once state
# ARGV: token lease_ms conversation entry_id group max_queued flag finished_batch
#       message consumer once_ms held
ENQUEUE_KEYS: Final = 9
ENQUEUE_ARGS: Final = 12
ENQUEUE_SHAPE: Final = (ENQUEUE_KEYS, ENQUEUE_ARGS)


def _each(function: str, n_keys: int, n_args: int) -> str:
    """Run `function` once per group of KEYS and ARGV, its own bound to K and A; one reply
    each, in order, {-2, error} for one that failed (the others still run)."""
    return f"""
local replies = {{}}
for i = 0, #KEYS / {n_keys} - 1 do
  K, A = {{}}, {{}}
  for j = 1, {n_keys} do K[j] = KEYS[{n_keys} * i + j] end
  for j = 1, {n_args} do A[j] = ARGV[{n_args} * i + j] end
  local ok, reply = pcall({function})
  if not ok then reply = {{-2, type(reply) == 'table' and reply.err or tostring(reply)}} end
  replies[i + 1] = reply
end
return replies
"""


ENQUEUE: Final = (
    "local K, A\n"
    + _LOOK
    + """
local function enqueue()
  if redis.call('EXISTS', K[8]) == 1 then return {-1} end
  if A[12] == '1' then
    local mode = redis.call('HGET', K[9], 'mode')
    if mode and mode ~= 'bot' then
      redis.call('SET', K[8], '1', 'PX', A[11])
      return {3, mode}
    end
  end
  if redis.call('LLEN', K[3]) >= tonumber(A[6]) then return {0} end
  redis.call('SET', K[8], '1', 'PX', A[11])
  redis.call('RPUSH', K[3], A[9])
  redis.call('ZADD', K[6], 0, A[3])
  -- a holder drains what is queued before it lets go (NEXT checks), so no entry is needed then
  if redis.call('EXISTS', K[1]) == 1 then return {1} end
  redis.call('XADD', K[7], 'MAXLEN', '~', 100000, '*', 'c', A[3])
  if A[10] == '' then return {1} end
  -- This process reads an entry itself (most often the one just added: the readers keep up),
  -- so the turn runs where its message arrived, without a reader's round trip. No group yet
  -- (Redis restarted empty): the reader creates it and reads the entry then.
  local read = redis.pcall('XREADGROUP', 'GROUP', A[5], A[10], 'COUNT', 1, 'STREAMS', K[7], '>')
  if type(read) ~= 'table' or read.err or not read[1] then return {1} end
  local entry = read[1][2][1]
  if entry[2][2] ~= A[3] then return {2, entry[1], entry[2][2], 0} end
  local out = claim(entry[1], K[9])
  table.insert(out, 1, entry[2][2])
  table.insert(out, 1, entry[1])
  table.insert(out, 1, 2)
  return out
end
"""
    + _each("enqueue", ENQUEUE_KEYS, ENQUEUE_ARGS)
)

# NEXT: the turn of `finished_batch` (the recorded batch's exact text, "" for none) is answered:
# forget it, then look. Comparing the text makes a retry after a lost reply harmless: the first
# attempt's next batch is not forgotten. -> {0} the lease was lost, else what look returned.
NEXT: Final = (
    _BIND
    + _MINE
    + _LOOK
    + """
if not mine() then return {0} end
if ARGV[8] ~= '' and redis.call('GET', KEYS[4]) == ARGV[8] then redis.call('DEL', KEYS[4]) end
return look(ARGV[4], KEYS[8])
"""
)

# NEXT for several conversations in one call (bot/redis/drain.py): groups of NEXT_KEYS keys and
# NEXT_ARGS arguments, one reply each, as ENQUEUE takes them.
NEXT_KEYS: Final = 8
NEXT_ARGS: Final = 8
NEXT_SHAPE: Final = (NEXT_KEYS, NEXT_ARGS)
NEXT_MANY: Final = (
    "local K, A\n"
    + _MINE
    + _LOOK
    + """
local function next_turn()
  if not mine() then return {0} end
  if A[8] ~= '' and redis.call('GET', K[4]) == A[8] then redis.call('DEL', K[4]) end
  return look(A[4], K[8])
end
"""
    + _each("next_turn", NEXT_KEYS, NEXT_ARGS)
)

# The lease heartbeat of every conversation this process holds, in one call per beat
# (bot/redis/drain.py's heartbeats): groups of EXTEND_KEYS keys and EXTEND_ARGS arguments.
# KEYS: lock fence stop ready; ARGV: token lease_ms entry_id group consumer
# -> {0} lost, {1} held, {2} held and a stop was asked. Held, the stream entry is claimed again
# for this consumer (XCLAIM resets its idle time), so no other process reclaims it meanwhile.
EXTEND_KEYS: Final = 4
EXTEND_ARGS: Final = 5
EXTEND_SHAPE: Final = (EXTEND_KEYS, EXTEND_ARGS)
EXTEND_MANY: Final = (
    "local K, A\n"
    + _MINE
    + """
local function extend()
  if not mine() then return {0} end
  redis.call('XCLAIM', K[4], A[4], A[5], 0, A[3], 'JUSTID')
  if redis.call('EXISTS', K[3]) == 1 then return {2} end
  return {1}
end
"""
    + _each("extend", EXTEND_KEYS, EXTEND_ARGS)
)

# Several queued: the batch the drain picked (bot/pipeline/conversations.next_batch) is taken,
# for any number of conversations in one call: groups of TAKE_KEYS keys and TAKE_ARGS arguments.
# KEYS: lock fence in turn stop; ARGV: token lease_ms batch picks (JSON: [[index, message]...])
# -> {1} taken, {0} lease lost, {-1} the queue changed under us (a /stop): look again
TAKE_KEYS: Final = 5
TAKE_ARGS: Final = 4
TAKE_SHAPE: Final = (TAKE_KEYS, TAKE_ARGS)
TAKE_MANY: Final = (
    "local K, A\n"
    + _MINE
    + """
local function take()
  if not mine() then return {0} end
  local picks = cjson.decode(A[4])
  for _, pick in ipairs(picks) do
    if redis.call('LINDEX', K[3], pick[1]) ~= pick[2] then return {-1} end
  end
  for _, pick in ipairs(picks) do redis.call('LSET', K[3], pick[1], '\\0taken') end
  redis.call('LREM', K[3], 0, '\\0taken')
  redis.call('SET', K[4], A[3])
  redis.call('DEL', K[5])
  return {1}
end
"""
    + _each("take", TAKE_KEYS, TAKE_ARGS)
)
