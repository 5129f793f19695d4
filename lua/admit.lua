-- admit.lua: the flash-sale admission gate, one atomic call per order request.
--
-- The keys are one bucket's (a voucher not split into buckets has one,
-- tagged {v:<id>}; bucket b of a split one is tagged {v:<id>:<b>:<n>}, shown
-- here as {t}). A user's orders always go to the user's own bucket, so the
-- per-user limit below is exact; a bucket that runs dry answers sold_out and
-- the caller borrows units from the other buckets (transfer_*.lua).
--
-- KEYS[1]  voucher hash  <prefix>:{t}:voucher  fields: stock, remaining, begins_ms, ends_ms, limit,
--                                              price, currency (absent or "0"/"": free),
--                                              paused ("1" while paused; absent or "0" otherwise),
--                                              keys_expire_ms (the expiry KEYS[2], [3], [5] last got),
--                                              shards (buckets of the voucher; absent: 1),
--                                              mode ("queue": an entry token is required; "draw": a win),
--                                              challenge_bits (a proof of work is required when above 0)
--                                              lost_ms, stalled_ms, alive_ms (the window clock:
--                                              window_clock.lua, read by window_time.lua, which the
--                                              gate puts before this script); stalled_ms is written
--                                              when a window is spent on an outage not yet logged
-- KEYS[2]  bought hash   <prefix>:{t}:bought   user id -> units admitted to that user
-- KEYS[3]  orders hash   <prefix>:{t}:orders   user id -> the user's latest admitted order id
-- KEYS[4]  retries hash  <prefix>:{t}:retries  "<user id>|<Idempotency-Key>" -> order id
-- KEYS[5]  admitted hash <prefix>:{t}:admitted order id -> "<user id>|<quantity>" of every admitted
--                                              order, or "fenced" (settle.lua: never to be admitted)
-- KEYS[6]  outbox stream admitted orders not yet in the log: <prefix>:outbox on a single Redis;
--                        on a Redis Cluster the bucket's own <prefix>:{t}:outbox, in the same slot
-- KEYS[7]  places hash   <prefix>:{t}:places   the waiting room's places (queue_join.lua), or a draw's
--                                              entries (draw_enter.lua): user id -> "<attempt>|<state>|
--                                              <entry or rank>|<extra>"
-- KEYS[8]  holds zset    <prefix>:{t}:holds    entry tokens (queue_advance.lua) or wins (draw_advance.lua)
--                                              not yet used
-- KEYS[9]  solved zset   <prefix>:{t}:solved   challenge nonce -> its expiry (ms): proofs of work spent
-- KEYS[10] pace hash     <prefix>:{t}:pace     "u:<user>" / "a:<address>" -> "<tokens>|<ms>": the
--                                              per-user and per-address admission buckets
-- KEYS[11] pending string <prefix>:{o:<order>}:pending  optional, on a single Redis only (on a cluster it
--                                              is in another slot, and the caller writes it after the
--                                              call): the admitted order's record, readable by order id
--                                              from any ingress before the log has it
-- ARGV[1]  user id
-- ARGV[2]  quantity, an integer >= 1
-- ARGV[3]  the order id to record when admitted
-- ARGV[4]  "<user id>|<Idempotency-Key>", or "" when the request has no key
-- ARGV[5]  the encoded OrderAccepted record, a JSON object without amount and currency: for a
--          priced voucher the script adds "amount" (price x quantity) and "currency" before
--          appending it to the outbox when admitted, so the amount is the price Redis admits at
-- ARGV[6]  voucher id: the record's Kafka key
-- ARGV[7]  outbox bound: at this many entries nothing more is admitted
-- ARGV[8]  milliseconds the voucher's keys outlive its sale: each key written expires at ends_ms + this
-- ARGV[9]  the number of buckets the caller took the voucher to have (the user's bucket follows from it)
-- ARGV[10] the entry (token id) the request presents, "" when none: a queue-mode voucher admits an
--          order only for the user's entry that is served, unexpired and unused, and spends it
-- ARGV[11] the encoded QueueEntryUsed record appended with the order when ARGV[10] is spent; on a
--          draw voucher the DrawWinUsed record without its rank (the script adds it); "" when none
-- ARGV[12] the solved challenge's nonce, "" when none was presented (the caller checked the signature
--          and the solution); "again:<nonce>" in a later round of one request (the caller borrowed
--          units from another bucket, or learned the bucket count, and calls again): the first round
--          spent it, and took from the buckets, so this one does neither
-- ARGV[13] leading zero bits the solution has
-- ARGV[14] the challenge's expiry (Unix ms, as signed)
-- ARGV[15] requests per second one user may make on this voucher (a token bucket; 0: no limit)
-- ARGV[16] the user's bucket size (burst)
-- ARGV[17] the client's address, "" when not known
-- ARGV[18] requests per second one address may make on this voucher (0: no limit)
-- ARGV[19] the address's bucket size
-- ARGV[20] with KEYS[11] only: milliseconds the pending record lives
--
-- Returns a two-element array {code, detail}, both strings:
--   {"admitted", remaining_after}          stock and the user's count were taken (or, for an order id
--                                          this script admitted before, had been: a repeated call, e.g.
--                                          a retry after a dropped connection, changes nothing but
--                                          writes the order's KEYS[5] record again, the same value)
--   {"replayed", "<order_id>|<quantity>"}  this key was admitted before; nothing changed but the key's
--                                          KEYS[4] record, written again with the same value (the
--                                          quantity is the first admission's, from KEYS[5]; empty if
--                                          not known)
--   {"unknown_voucher", ""}                no such voucher loaded
--   {"not_started", begins_ms}             before the sale window
--   {"ended", ends_ms}                     after the sale window
--   {"paused", ""}                         an admin paused the sale
--   {"duplicate_order", order_id}          the user already holds the whole limit
--   {"limit_exceeded", limit}              this quantity would pass the user's limit
--   {"sold_out", remaining}                fewer units left than asked for
--   {"backlog_full", entries}              the outbox is full (the log is down); nothing changed
--   {"fenced", ""}                         settle.lua settled this order id as not admitted (this call
--                                          arrived after its caller gave up); nothing changed
--   {"wrong_shards", shards}               the voucher has this many buckets, not ARGV[9]: the caller
--                                          picked the user's bucket from a wrong count; nothing changed
--   {"entry_required", ""}                 a queue-mode voucher and no entry presented
--   {"entry_invalid", ""}                  not the user's entry, or not served to them
--   {"entry_expired", expires_ms}          the entry's time is over
--   {"entry_used", order_id}               the entry admitted this order before (under another order
--                                          id: a retry without the Idempotency-Key); nothing changed
--   {"not_won", ""}                        a draw voucher and the user holds no win (yet)
--   {"window_closed", ends_ms}             the user's purchase window is over
--   {"win_used", order_id}                 the win admitted this order before; nothing changed
--   {"rate_limited", "<ms>|user"}          the user's bucket ("|address": the address's) is empty: a
--                                          token comes in <ms>; nothing changed
--   {"challenge_required", bits}           the voucher asks for a proof of work and none was presented
--   {"challenge_too_easy", bits}           the solution has fewer bits than the voucher asks
--   {"challenge_expired", expires_ms}      the challenge's time is over (the Redis clock)
--   {"challenge_used", ""}                 this challenge paid for a request before; nothing changed
--
-- A proof of work pays for one attempt: it is spent as soon as it is
-- checked, whatever the answer after it (sold out, the limit), so a bot
-- pays for every try. The buckets are taken before it: a request refused
-- for its pace spends nothing.
--
-- Every admitted order id is recorded in the admitted hash, so a caller
-- whose call timed out can find out what happened (settle.lua), and a call
-- that arrives after settle.lua said "not admitted" is refused by the same
-- record: the answer the client got stays true.
--
-- A repeated call and a replay write their record again, unchanged: the
-- caller may follow this call with WAIT (gate/src/replica_acks.rs), and the
-- first write may have been made over another connection. Redis 7.0 has a
-- WAIT cover the replication stream up to the connection's last command of
-- any kind; later versions only up to its last write. Writing now puts a
-- write of this call after the first one in the stream, so a replica that
-- acknowledges it has both, whichever the server.
--
-- Admission and the outbox entry are one atomic step: an order Redis took
-- stock for is always in the outbox, and the relay publishes it to Kafka and
-- then deletes it, so no crash between the two can strand admitted stock.
--
-- Nothing outlives its sale: every key written here expires ARGV[8] ms
-- after the sale's end (load_voucher.lua, update_voucher.lua and
-- restore.lua set the same time on the voucher's other keys).
--
-- The window is judged by the Redis server clock (TIME), one clock for every
-- ingress instance (on a cluster, the clock of the bucket's master: keep the
-- masters' clocks synchronised). The bucket's keys share one hash tag, and
-- so does its outbox on a cluster. The script builds no key names itself.
if not ((#KEYS == 10 and #ARGV == 19) or (#KEYS == 11 and #ARGV == 20)) then
  return redis.error_reply("admit.lua: expects 10 KEYS and 19 ARGV, or 11 KEYS and 20 ARGV")
end
if KEYS[11] then
  local ttl = tonumber(ARGV[20])
  if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
    return redis.error_reply("admit.lua: ARGV[20] must be a positive integer (ms)")
  end
end
local quantity = tonumber(ARGV[2])
if not quantity or quantity < 1 or quantity ~= math.floor(quantity) then
  return redis.error_reply("admit.lua: quantity must be a positive integer")
end

-- Every field the call may need, in one read (the window clock's two
-- included): each redis.call is a round through the server's command path.
local voucher = redis.call("HMGET", KEYS[1],
  "remaining", "begins_ms", "ends_ms", "limit", "paused", "keys_expire_ms", "shards", "price", "currency", "mode",
  "challenge_bits", "lost_ms", "stalled_ms", "alive_ms")
if not voucher[1] then
  return {"unknown_voucher", ""}
end
if (voucher[7] or "1") ~= ARGV[9] then
  return {"wrong_shards", voucher[7] or "1"}
end

-- This order id was decided before: fenced stays fenced, and a call that
-- runs again after admitting (its answer was lost and the client library
-- sent it once more) is told so without taking anything twice.
local recorded = redis.call("HGET", KEYS[5], ARGV[3])
if recorded == "fenced" then
  return {"fenced", ""}
end
if recorded then
  redis.call("HSET", KEYS[5], ARGV[3], recorded)
  return {"admitted", voucher[1]}
end

-- A retry of an admitted request gets its order back, whatever happened
-- since (sold out, window closed): the client lost an answer, not a race.
if ARGV[4] ~= "" then
  local previous = redis.call("HGET", KEYS[4], ARGV[4])
  if previous then
    redis.call("HSET", KEYS[4], ARGV[4], previous)
    -- The retry may ask for another quantity: the answer is the order the
    -- key admitted, as it was admitted.
    local first = redis.call("HGET", KEYS[5], previous)
    local quantity = first and string.match(first, "|(%d+)$") or ""
    return {"replayed", previous .. "|" .. quantity}
  end
end

local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local keys_expire = tonumber(voucher[3]) + tonumber(ARGV[8])

-- The pace: a token bucket per user and per address, by the Redis clock,
-- shared by every ingress. Both are judged before either is taken from.
local paces = {}
-- The tokens a bucket's state holds now (a bucket not kept is full).
local function tokens_of(state, rate, burst)
  if not state then
    return burst
  end
  local left, at = string.match(state, "^([%d.]+)|(%d+)$")
  return math.min(burst, tonumber(left) + math.max(now_ms - tonumber(at), 0) * rate / 1000)
end
local function pace(field, rate, burst)
  if rate <= 0 or field == "a:" then
    return 0
  end
  local state = redis.call("HGET", KEYS[10], field)
  local tokens = tokens_of(state, rate, burst)
  if tokens < 1 then
    return math.ceil((1 - tokens) * 1000 / rate)
  end
  paces[#paces + 1] = {field, string.format("%.3f|%d", tokens - 1, now_ms), not state}
  return 0
end
local user_wait = pace("u:" .. ARGV[1], tonumber(ARGV[15]), tonumber(ARGV[16]))
local address_wait = pace("a:" .. ARGV[17], tonumber(ARGV[18]), tonumber(ARGV[19]))
if user_wait > 0 or address_wait > 0 then
  local by = user_wait >= address_wait and "user" or "address"
  return {"rate_limited", tostring(math.max(user_wait, address_wait)) .. "|" .. by}
end
-- Bounded: a bucket that has filled up again is the same as none, so each
-- new field looks at a few fields picked at random and drops those full
-- again. The hash then holds about the buckets not yet refilled (a few
-- seconds' worth of users and addresses), not one field for every IPv6 /64
-- an attacker rotates through for the sale and a week after it. In a sale
-- nearly every request is a user's first, so this runs on nearly every
-- call: the sample comes with its values, and is dropped in one HDEL.
-- The hash's expiry is set where this call may have created it: found
-- empty, or emptied by the drop (a sample of four all dropped may have been
-- all there was). A hash kept since has its expiry from the call that made
-- it, moved by update_voucher.lua with the sale's end.
local created = false
for _, taken in ipairs(paces) do
  -- (A bucket the hash held before, taken[3] false: the hash exists.)
  if taken[3] then
    local sample = redis.call("HRANDFIELD", KEYS[10], 4, "WITHVALUES")
    local full = {}
    for i = 1, #sample, 2 do
      local field = sample[i]
      local rate, burst = tonumber(ARGV[15]), tonumber(ARGV[16])
      if string.sub(field, 1, 2) == "a:" then
        rate, burst = tonumber(ARGV[18]), tonumber(ARGV[19])
      end
      if rate <= 0 or tokens_of(sample[i + 1], rate, burst) >= burst then
        full[#full + 1] = field
      end
    end
    if #full > 0 then
      redis.call("HDEL", KEYS[10], unpack(full))
    end
    created = created or #full * 2 == #sample
  end
  redis.call("HSET", KEYS[10], taken[1], taken[2])
end
if created then
  redis.call("PEXPIREAT", KEYS[10], keys_expire)
end

if now_ms < tonumber(voucher[2]) then
  return {"not_started", voucher[2]}
end
if now_ms >= tonumber(voucher[3]) then
  return {"ended", voucher[3]}
end
if voucher[5] == "1" then
  return {"paused", ""}
end

-- The proof of work: spent here, once. Its expiry is judged by this clock
-- alone; the bits the rate of proofs spent adds above the voucher's own are
-- judged by the caller just before this call (ingress/src/challenge.rs).
local bits = tonumber(voucher[11] or "0") or 0
local nonce = ARGV[12]
local again = string.sub(nonce, 1, 6) == "again:"
if again then
  nonce = string.sub(nonce, 7)
end
if bits > 0 then
  if nonce == "" then
    return {"challenge_required", tostring(bits)}
  end
  if tonumber(ARGV[13]) < bits then
    return {"challenge_too_easy", tostring(bits)}
  end
  if not again then
    if now_ms >= tonumber(ARGV[14]) then
      return {"challenge_expired", ARGV[14]}
    end
    if redis.call("ZSCORE", KEYS[9], nonce) then
      return {"challenge_used", ""}
    end
    redis.call("ZREMRANGEBYSCORE", KEYS[9], "-inf", now_ms)
    redis.call("ZADD", KEYS[9], ARGV[14], nonce)
    redis.call("PEXPIREAT", KEYS[9], keys_expire)
  end
end

-- A waiting room's entry: checked here, spent below with the admission, so
-- one entry admits one order whichever ingress each retry reaches.
--
-- Their ends are on the window clock of queue_advance.lua and
-- draw_advance.lua, which stands still while ordering is impossible (the
-- sale paused, the outbox full, no ingress reaching Redis): window time is
-- Redis time less lost_ms, frozen at stalled_ms during a stall, and from
-- the last advance call on when none came for longer than the ticks' slack
-- (window_time.lua). An end is answered in Redis time, as it stands now.
local place
local entry = ARGV[10]
local window_now, window_stall = window_time(voucher[12], voucher[13], voucher[14], now_ms)
local function as_redis_time(ends)
  return string.format("%d", tonumber(ends) + now_ms - window_now)
end
if voucher[10] == "draw" then
  -- A draw's win: the user's own, within its window, spent with the order.
  place = redis.call("HGET", KEYS[7], ARGV[1]) or ""
  local _, state, rank, extra = string.match(place, "^(%d+)|(%a)|(%d*)|(.*)$")
  if state == "u" then
    return {"win_used", extra}
  end
  if state ~= "s" then
    return {"not_won", ""}
  end
  if window_now >= tonumber(extra) then
    return {"window_closed", as_redis_time(extra)}
  end
  entry = rank
elseif voucher[10] == "queue" then
  if ARGV[10] == "" then
    return {"entry_required", ""}
  end
  place = redis.call("HGET", KEYS[7], ARGV[1]) or ""
  local _, state, held, extra = string.match(place, "^(%d+)|(%a)|(%d*)|(.*)$")
  if held ~= ARGV[10] then
    return {"entry_invalid", ""}
  end
  if state == "u" then
    return {"entry_used", extra}
  end
  if state ~= "s" then
    return {"entry_invalid", ""}
  end
  if window_now >= tonumber(extra) then
    return {"entry_expired", as_redis_time(extra)}
  end
end

local limit = tonumber(voucher[4])
local bought = tonumber(redis.call("HGET", KEYS[2], ARGV[1]) or "0")
if bought + quantity > limit then
  if bought >= limit then
    return {"duplicate_order", redis.call("HGET", KEYS[3], ARGV[1]) or ""}
  end
  return {"limit_exceeded", voucher[4]}
end

local remaining = tonumber(voucher[1])
if remaining < quantity then
  return {"sold_out", voucher[1]}
end

local backlog = redis.call("XLEN", KEYS[6])
if backlog >= tonumber(ARGV[7]) then
  return {"backlog_full", tostring(backlog)}
end

local record = ARGV[5]
local price = tonumber(voucher[8] or "0") or 0
if price > 0 then
  -- Prices stay below 2^37 and quantities below 2^14 (the voucher's checks),
  -- so the product is exact in Lua's doubles and printed without exponent.
  record = string.sub(record, 1, -2) .. string.format(',"amount":%d,"currency":"%s"}', price * quantity, voucher[9])
end
redis.call("HSET", KEYS[5], ARGV[3], ARGV[1] .. "|" .. ARGV[2])
redis.call("XADD", KEYS[6], "*", "key", ARGV[6], "record", record)
if KEYS[11] then
  -- The record the log will have, amount included: one call fewer per order
  -- than the caller's own SET after this one.
  redis.call("SET", KEYS[11], record, "PX", ARGV[20])
end
redis.call("HINCRBY", KEYS[1], "remaining", -quantity)
redis.call("HINCRBY", KEYS[2], ARGV[1], quantity)
redis.call("HSET", KEYS[3], ARGV[1], ARGV[3])
if ARGV[4] ~= "" then
  redis.call("HSET", KEYS[4], ARGV[4], ARGV[3])
end
if place then
  redis.call("HSET", KEYS[7], ARGV[1], string.match(place, "^(%d+)|") .. "|u|" .. entry .. "|" .. ARGV[3])
  redis.call("ZREM", KEYS[8], entry)
  local used = ARGV[11]
  if voucher[10] == "draw" then
    used = string.sub(used, 1, -2) .. string.format(',"rank":%s}', entry)
  end
  redis.call("XADD", KEYS[6], "*", "key", ARGV[6], "record", used)
  if window_stall and not voucher[13] then
    -- Spent on an outage's time that no advance call has logged yet: marked,
    -- so the next call logs it (window_clock.lua) though this window is no
    -- longer open, and every later order is judged on the same clock.
    redis.call("HSET", KEYS[1], "stalled_ms", string.format("%d", window_stall))
  end
end
-- Each key expires with the sale, wherever PATCH moved its end. The
-- voucher hash remembers (keys_expire_ms) the time the bought, orders and
-- admitted hashes were last given, so the hot path sets it only when it
-- changed; whatever may delete one of them (release.lua emptying it,
-- restore.lua, update_voucher.lua moving the end) drops that field.
local expires = tonumber(voucher[3]) + tonumber(ARGV[8])
if voucher[6] ~= tostring(expires) then
  redis.call("PEXPIREAT", KEYS[2], expires)
  redis.call("PEXPIREAT", KEYS[3], expires)
  redis.call("PEXPIREAT", KEYS[5], expires)
  redis.call("HSET", KEYS[1], "keys_expire_ms", tostring(expires))
end
if ARGV[4] ~= "" then
  redis.call("PEXPIREAT", KEYS[4], expires)
end
return {"admitted", tostring(remaining - quantity)}
