-- load_voucher.lua: makes a voucher bucket admissible, once. A voucher not
-- split into buckets is its bucket 0 ({t} = {v:<id>}); a split one is loaded
-- bucket by bucket, bucket 0 last, so a voucher whose bucket 0 is in Redis
-- has all of its buckets.
--
-- KEYS[1]  voucher hash   <prefix>:{t}:voucher
-- KEYS[2]  bought hash    <prefix>:{t}:bought
-- KEYS[3]  orders hash    <prefix>:{t}:orders
-- KEYS[4]  released set   <prefix>:{t}:released
-- KEYS[5]  retries hash   <prefix>:{t}:retries
-- KEYS[6]  updates set    <prefix>:{t}:updates
-- KEYS[7]  admitted hash  <prefix>:{t}:admitted
-- KEYS[8]  added hash     <prefix>:{t}:added
-- KEYS[9]  transfers hash <prefix>:{t}:transfers
-- KEYS[10] newest end     <prefix>:{t}:newest_end  (written by update_voucher.lua; read here)
-- ARGV[1]  stock: the bucket's share of the voucher's units (integer >= 0)
-- ARGV[2]  begins_ms (Unix milliseconds)
-- ARGV[3]  ends_ms (Unix milliseconds, > begins_ms)
-- ARGV[4]  per-user limit (integer >= 1)
-- ARGV[5]  hold_seconds (integer >= 0): shown to readers, not used here
-- ARGV[6]  milliseconds the voucher's keys outlive its sale (integer >= 1)
-- ARGV[7]  shards: the voucher's number of buckets (integer >= 1)
-- ARGV[8]  the voucher's units in all (the sum of every bucket's share)
-- ARGV[9]  price of one unit in minor units (integer >= 0; 0: free)
-- ARGV[10] the price's currency (ISO 4217), "" when free
-- ARGV[11] the sale's mode: "fcfs", "queue" (orders need an entry token) or "draw" (orders need a win)
-- ARGV[12] the proof of work each order, join or entry needs, in leading zero bits (0: none)
--
-- A bucket of a split voucher also keeps shards and voucher_stock (the
-- voucher's units in all, which update_voucher.lua grows with added stock);
-- its stock is its allotment, which transfers between buckets move. A
-- voucher of one bucket is written exactly as before buckets existed.
--
-- Returns 1 when the voucher was loaded, 0 when it already existed (nothing
-- changes: loading again never resets a sale's remaining stock) or when its
-- sale ended more than ARGV[6] ms ago by the Redis clock (its keys expired;
-- a definition delivered again never brings an old sale back). The end is
-- the newest an admin gave the sale (KEYS[10]) when there is one: a replay
-- of the log delivers the definition with the end it was created with, and
-- a sale whose end was moved earlier must not come back with full stock
-- until its first end. Every key of the voucher expires at ends_ms +
-- ARGV[6]; KEYS[2..9] are passed so a key written before the voucher (a
-- fence of settle.lua) gets that time too.
if #KEYS ~= 10 or #ARGV ~= 12 then
  return redis.error_reply("load_voucher.lua: expects 10 KEYS and 12 ARGV")
end
local ends = tonumber(redis.call("GET", KEYS[10]) or ARGV[3])
local ttl = tonumber(ARGV[6])
if not ends or not ttl or ttl < 1 then
  return redis.error_reply("load_voucher.lua: ends_ms and the TTL must be numbers, the TTL at least 1")
end
if redis.call("EXISTS", KEYS[1]) == 1 then
  -- Written again, the same value: the caller may follow this call with
  -- WAIT (gate/src/replica_acks.rs), which on a Redis after 7.0 covers a
  -- connection's writes only; a repeat of a load whose first answer no
  -- replica acknowledged must still wait for the first call's write.
  redis.call("HSET", KEYS[1], "stock", redis.call("HGET", KEYS[1], "stock"))
  return 0
end
local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if ends + ttl <= now_ms then
  return 0
end
redis.call("HSET", KEYS[1],
  "stock", ARGV[1], "remaining", ARGV[1],
  "begins_ms", ARGV[2], "ends_ms", string.format("%d", ends), "limit", ARGV[4], "hold_seconds", ARGV[5],
  "price", ARGV[9], "currency", ARGV[10], "mode", ARGV[11],
  "challenge_bits", ARGV[12])
if ARGV[7] ~= "1" then
  redis.call("HSET", KEYS[1], "shards", ARGV[7], "voucher_stock", ARGV[8])
end
for i = 1, 9 do
  redis.call("PEXPIREAT", KEYS[i], ends + ttl)
end
return 1
