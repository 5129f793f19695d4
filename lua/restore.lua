-- restore.lua: rebuilds one voucher bucket's admission state from what the
-- log (and the outbox) say, atomically, while the platform keeps running
-- (`seckill reconcile`); or, in "check" mode, only says whether and how the
-- state in Redis differs. A voucher not split into buckets is its bucket 0
-- ({t} = {v:<id>}); a split one is restored bucket by bucket, each with the
-- orders of its own users and its allotment of the stock.
--
-- KEYS[1]  voucher hash   <prefix>:{t}:voucher
-- KEYS[2]  bought hash    <prefix>:{t}:bought     user id -> units held
-- KEYS[3]  orders hash    <prefix>:{t}:orders     user id -> latest holding order
-- KEYS[4]  released set   <prefix>:{t}:released
-- KEYS[5]  retries hash   <prefix>:{t}:retries    (not in the log: kept, given the expiry)
-- KEYS[6]  updates set    <prefix>:{t}:updates
-- KEYS[7]  admitted hash  <prefix>:{t}:admitted   order id -> "<user id>|<quantity>", or "fenced"
-- KEYS[8]  added hash     <prefix>:{t}:added      update id -> units it added to this bucket
-- KEYS[9]  transfers hash <prefix>:{t}:transfers  (not in the log: kept, given the expiry)
-- ARGV[1]  "write" or "check"
-- ARGV[2]  stock: the bucket's allotment as of the log (unsplit: the
--          definition's units plus what the log's updates added)
-- ARGV[3]  begins_ms
-- ARGV[4]  ends_ms, as the log's newest settings update has it
-- ARGV[5]  per-user limit
-- ARGV[6]  hold_seconds
-- ARGV[7]  paused: "1" or "0"
-- ARGV[8]  the log's newest settings update id, or ""
-- ARGV[9]  milliseconds the voucher's keys outlive its sale (integer >= 1)
-- ARGV[10] R: how many released order ids follow
-- ARGV[11] U: how many applied update ids follow them
-- ARGV[12] shards: the voucher's number of buckets
-- ARGV[13] the voucher's units in all as of the log (written to a bucket of a
--          split voucher as voucher_stock)
-- ARGV[14] price of one unit in minor units (0: free)
-- ARGV[15] the price's currency, "" when free
-- ARGV[16] the sale's mode: "queue" (orders need an entry token, admit.lua), "draw" (orders need a
--          win) or "fcfs"
-- ARGV[17] the proof of work each order needs, in leading zero bits (0: none)
-- ARGV[18 .. 17+R]         the order ids the log says gave their units back
-- ARGV[18+R .. 17+R+U]     the update ids in the log
-- ARGV[18+R+U ..]          every order of the bucket's users the log and the
--                          outbox know, held or not, as triples: order id,
--                          user id, quantity
--
-- What landed in Redis after the log was read stays, because this runs as
-- one atomic step after whatever did, and counts it:
--   * an order released.lua gave back (the released set): its units stay
--     returned, whatever the log said;
--   * an order admit.lua admitted (the admitted hash) that the log and the
--     outbox did not have yet: it holds its units;
--   * an update update_voucher.lua applied that the log did not have: its
--     units (the added hash) stay added; a newer pause or end
--     (settings_version) stays.
-- Transfers between buckets are not in the log: the caller completes the
-- ones under way and stops new ones before restoring a split voucher, and
-- passes each bucket's allotment as of the log.
--
-- Returns {action, remaining_before, remaining_after, users_fixed, differences}:
--   action "unchanged"  every field it would write is already so (the
--                       voucher hash, holders, latest orders, released,
--                       applied and admitted orders, every key's expiry)
--   action "corrected"  it differed (and, in "write" mode, was rewritten)
--   action "restored"   the voucher was missing (and, writing, is back)
--   action "expired"    the sale ended longer ago than its keys outlive it:
--                       nothing is restored ("write" removes what is left)
--   remaining_before is "" when the voucher was missing; remaining_after is
--   "" for "expired"; users_fixed counts users whose units differ (the first
--   four are strings); differences lists, for "corrected", what differed,
--   each as a phrase: "ends_ms 1700000000000 → 1700003600000", "the latest
--   order of 2 users", "the expiry of bought, orders" (empty otherwise).
if #KEYS ~= 9 or #ARGV < 17 then
  return redis.error_reply("restore.lua: expects 9 KEYS and at least 17 ARGV")
end
local mode = ARGV[1]
if mode ~= "write" and mode ~= "check" then
  return redis.error_reply("restore.lua: the mode must be write or check")
end
local ttl = tonumber(ARGV[9])
local released_count = tonumber(ARGV[10])
local update_count = tonumber(ARGV[11])
if not ttl or ttl < 1 or not released_count or not update_count then
  return redis.error_reply("restore.lua: the TTL and the counts must be numbers")
end
local shards = ARGV[12]
local first_order = 18 + released_count + update_count
if first_order - 1 > #ARGV or (#ARGV - first_order + 1) % 3 ~= 0 then
  return redis.error_reply("restore.lua: the counts do not match the arguments")
end
local write = mode == "write"

-- Redis commands take at most this many values at once from here.
local CHUNK = 1000
local function in_chunks(command, key, values)
  for first = 1, #values, CHUNK do
    redis.call(command, key, unpack(values, first, math.min(first + CHUNK - 1, #values)))
  end
end
local function as_map(flat)
  local map = {}
  for i = 1, #flat, 2 do
    map[flat[i]] = flat[i + 1]
  end
  return map
end
local function as_set(list)
  local set = {}
  for _, member in ipairs(list) do
    set[member] = true
  end
  return set
end

local current = redis.call("HMGET", KEYS[1],
  "stock", "remaining", "begins_ms", "ends_ms", "limit", "hold_seconds", "paused", "settings_version",
  "shards", "voucher_stock", "price", "currency", "mode", "challenge_bits")
local existed = current[1] ~= false
local before = current[2] or ""

-- Settings: the log's newest, unless Redis has applied a newer one since.
local ends, paused, version = ARGV[4], ARGV[7], ARGV[8]
if existed and current[8] and current[4] and current[8] > version then
  ends, paused, version = current[4], current[7] or "0", current[8]
end
local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local expires = tonumber(ends) + ttl
if expires <= now_ms then
  if write and redis.call("EXISTS", unpack(KEYS)) > 0 then
    redis.call("DEL", unpack(KEYS))
  end
  return {"expired", before, "", "0", {}}
end

-- Given back: what the log says, and whatever release.lua did since.
local log_released = {}
for i = 18, 17 + released_count do
  log_released[#log_released + 1] = ARGV[i]
end
local in_redis_released = as_set(redis.call("SMEMBERS", KEYS[4]))
local released = as_set(log_released)
for id in pairs(in_redis_released) do
  released[id] = true
end

-- Stock: the log's, plus the units of updates applied since it was read.
local log_updates = {}
for i = 18 + released_count, 17 + released_count + update_count do
  log_updates[#log_updates + 1] = ARGV[i]
end
local known_updates = as_set(log_updates)
local in_redis_updates = as_set(redis.call("SMEMBERS", KEYS[6]))
local stock = tonumber(ARGV[2])
local voucher_stock = tonumber(ARGV[13])
for id in pairs(in_redis_updates) do
  if not known_updates[id] then
    stock = stock + tonumber(redis.call("HGET", KEYS[8], id) or "0")
    voucher_stock = voucher_stock + tonumber(redis.call("HGET", KEYS[8], id .. ":total") or "0")
  end
end
local split = shards ~= "1"

-- Holders: every order known and not given back, plus orders admitted
-- since the log and the outbox were read.
local bought, latest, held = {}, {}, 0
local function hold(order, user, quantity)
  held = held + quantity
  bought[user] = (bought[user] or 0) + quantity
  -- Order ids are UUIDv7 strings: the greatest is the latest.
  if not latest[user] or order > latest[user] then
    latest[user] = order
  end
end
local known, admitted_target = {}, {}
for i = first_order, #ARGV, 3 do
  local order, user, quantity = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  known[order] = true
  admitted_target[#admitted_target + 1] = order
  admitted_target[#admitted_target + 1] = user .. "|" .. ARGV[i + 2]
  if not released[order] then
    hold(order, user, quantity)
  end
end
local in_redis_admitted = as_map(redis.call("HGETALL", KEYS[7]))
for order, recorded in pairs(in_redis_admitted) do
  if not known[order] and not released[order] and recorded ~= "fenced" then
    local user, quantity = string.match(recorded, "^(.*)|(%d+)$")
    if user then
      hold(order, user, tonumber(quantity))
    end
  end
end
local remaining = math.max(stock - held, 0)

-- Is everything it would write already so? What differs, in words.
local differences = {}
local function differ(phrase)
  differences[#differences + 1] = phrase
end
local function shown(value)
  if value == false or value == nil then
    return "none"
  end
  return tostring(value)
end
local function compare(name, found, wanted)
  if found ~= wanted then
    differ(name .. " " .. shown(found) .. " → " .. shown(wanted))
  end
end
local function count_phrase(count, one, many)
  if count == 1 then
    return one
  end
  return count .. " " .. many
end
local names = {"begins_ms", "ends_ms", "limit", "hold_seconds", "price", "currency", "mode", "challenge_bits"}
local target = {ARGV[3], ends, ARGV[5], ARGV[6], ARGV[14], ARGV[15], ARGV[16], ARGV[17]}
local fields = {current[3], current[4], current[5], current[6], current[11] or "0", current[12] or "", current[13] or "fcfs",
  current[14] or "0"}
if existed then
  for i = 1, #target do
    compare(names[i], fields[i], target[i])
  end
  compare("stock", tonumber(current[1]), stock)
  compare("remaining", tonumber(current[2]), remaining)
  compare("paused", current[7] or "0", paused)
  compare("settings_version", current[8] or "", version)
  if split then
    compare("shards", current[9], shards)
    compare("voucher_stock", tonumber(current[10]), voucher_stock)
  else
    -- A bucket not split has neither field (false: HMGET found none).
    compare("shards", current[9] or "none", "none")
    compare("voucher_stock", current[10] or "none", "none")
  end
end
local in_redis_bought = as_map(redis.call("HGETALL", KEYS[2]))
local users_fixed = 0
for user, units in pairs(bought) do
  if tonumber(in_redis_bought[user]) ~= units then
    users_fixed = users_fixed + 1
  end
end
for user in pairs(in_redis_bought) do
  if not bought[user] then
    users_fixed = users_fixed + 1
  end
end
if users_fixed > 0 then
  differ("the units of " .. count_phrase(users_fixed, "1 user", "users"))
end
local in_redis_latest = as_map(redis.call("HGETALL", KEYS[3]))
local latest_differ = 0
for user, order in pairs(latest) do
  if in_redis_latest[user] ~= order then
    latest_differ = latest_differ + 1
  end
end
for user in pairs(in_redis_latest) do
  if latest[user] == nil then
    latest_differ = latest_differ + 1
  end
end
if latest_differ > 0 then
  differ("the latest order of " .. count_phrase(latest_differ, "1 user", "users"))
end
local unmarked = 0
for _, order in ipairs(log_released) do
  if in_redis_released[order] ~= true then
    unmarked = unmarked + 1
  end
end
if unmarked > 0 then
  differ(count_phrase(unmarked, "1 order", "orders") .. " given back but not in the released set")
end
local unapplied = 0
for _, update in ipairs(log_updates) do
  if in_redis_updates[update] ~= true then
    unapplied = unapplied + 1
  end
end
if unapplied > 0 then
  differ(count_phrase(unapplied, "1 update", "updates") .. " of the log not in the applied set")
end
local unrecorded = 0
for i = 1, #admitted_target, 2 do
  if in_redis_admitted[admitted_target[i]] ~= admitted_target[i + 1] then
    unrecorded = unrecorded + 1
  end
end
if unrecorded > 0 then
  differ(count_phrase(unrecorded, "1 admitted order", "admitted orders") .. " not recorded as the log has them")
end
local expiring_otherwise = {}
for _, key in ipairs(KEYS) do
  local at = redis.call("PEXPIRETIME", key)
  if at ~= -2 and at ~= expires then
    local name = string.match(key, ":([^:]+)$") or key
    if at == -1 then
      name = name .. " (none)"
    else
      name = name .. " (" .. at .. ")"
    end
    expiring_otherwise[#expiring_otherwise + 1] = name
  end
end
if #expiring_otherwise > 0 then
  differ("the expiry of " .. table.concat(expiring_otherwise, ", ") .. " → " .. expires)
end
local same = existed and #differences == 0

local action = "corrected"
if same then
  action = "unchanged"
elseif not existed then
  action = "restored"
end
if write and not same then
  redis.call("HSET", KEYS[1], "stock", stock, "remaining", remaining, "begins_ms", ARGV[3], "ends_ms", ends,
    "limit", ARGV[5], "hold_seconds", ARGV[6], "paused", paused, "price", ARGV[14], "currency", ARGV[15],
    "mode", ARGV[16], "challenge_bits", ARGV[17])
  if version ~= "" then
    redis.call("HSET", KEYS[1], "settings_version", version)
  else
    redis.call("HDEL", KEYS[1], "settings_version")
  end
  if split then
    redis.call("HSET", KEYS[1], "shards", shards, "voucher_stock", voucher_stock)
  else
    redis.call("HDEL", KEYS[1], "shards", "voucher_stock")
  end
  -- The holders' hashes may stay empty (gone): admit.lua sets their expiry.
  redis.call("HDEL", KEYS[1], "keys_expire_ms")
  redis.call("DEL", KEYS[2], KEYS[3])
  local pairs_bought, pairs_latest = {}, {}
  for user, units in pairs(bought) do
    pairs_bought[#pairs_bought + 1] = user
    pairs_bought[#pairs_bought + 1] = units
  end
  for user, order in pairs(latest) do
    pairs_latest[#pairs_latest + 1] = user
    pairs_latest[#pairs_latest + 1] = order
  end
  -- Whole field/value pairs per chunk: CHUNK is even.
  in_chunks("HSET", KEYS[2], pairs_bought)
  in_chunks("HSET", KEYS[3], pairs_latest)
  in_chunks("SADD", KEYS[4], log_released)
  in_chunks("SADD", KEYS[6], log_updates)
  in_chunks("HSET", KEYS[7], admitted_target)
  for _, key in ipairs(KEYS) do
    redis.call("PEXPIREAT", key, expires)
  end
end
if same or not existed then
  differences = {}
end
return {action, before, tostring(remaining), tostring(users_fixed), differences}
