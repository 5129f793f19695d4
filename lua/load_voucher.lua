-- load_voucher.lua: makes a voucher admissible, once.
--
-- KEYS[1]  voucher hash   <prefix>:{v:<id>}:voucher
-- KEYS[2]  bought hash    <prefix>:{v:<id>}:bought
-- KEYS[3]  orders hash    <prefix>:{v:<id>}:orders
-- KEYS[4]  released set   <prefix>:{v:<id>}:released
-- KEYS[5]  retries hash   <prefix>:{v:<id>}:retries
-- KEYS[6]  updates set    <prefix>:{v:<id>}:updates
-- KEYS[7]  admitted hash  <prefix>:{v:<id>}:admitted
-- KEYS[8]  added hash     <prefix>:{v:<id>}:added
-- ARGV[1]  stock (integer >= 0)
-- ARGV[2]  begins_ms (Unix milliseconds)
-- ARGV[3]  ends_ms (Unix milliseconds, > begins_ms)
-- ARGV[4]  per-user limit (integer >= 1)
-- ARGV[5]  hold_seconds (integer >= 0): shown to readers, not used here
-- ARGV[6]  milliseconds the voucher's keys outlive its sale (integer >= 1)
--
-- Returns 1 when the voucher was loaded, 0 when it already existed (nothing
-- changes: loading again never resets a sale's remaining stock) or when its
-- sale ended more than ARGV[6] ms ago by the Redis clock (its keys expired;
-- a definition delivered again never brings an old sale back). Every key
-- of the voucher expires at ends_ms + ARGV[6]; KEYS[2..8] are passed so a
-- key written before the voucher (a fence of settle.lua) gets that time too.
if #KEYS ~= 8 or #ARGV ~= 6 then
  return redis.error_reply("load_voucher.lua: expects 8 KEYS and 6 ARGV")
end
local ends = tonumber(ARGV[3])
local ttl = tonumber(ARGV[6])
if not ends or not ttl or ttl < 1 then
  return redis.error_reply("load_voucher.lua: ends_ms and the TTL must be numbers, the TTL at least 1")
end
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if ends + ttl <= now_ms then
  return 0
end
redis.call("HSET", KEYS[1],
  "stock", ARGV[1], "remaining", ARGV[1],
  "begins_ms", ARGV[2], "ends_ms", ARGV[3], "limit", ARGV[4], "hold_seconds", ARGV[5])
for _, key in ipairs(KEYS) do
  redis.call("PEXPIREAT", key, ends + ttl)
end
return 1
