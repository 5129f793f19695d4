-- load_voucher.lua: makes a voucher admissible, once.
--
-- KEYS[1]  voucher hash  <prefix>:{v:<id>}:voucher
-- ARGV[1]  stock (integer >= 0)
-- ARGV[2]  begins_ms (Unix milliseconds)
-- ARGV[3]  ends_ms (Unix milliseconds, > begins_ms)
-- ARGV[4]  per-user limit (integer >= 1)
-- ARGV[5]  hold_seconds (integer >= 0): shown to readers, not used here
--
-- Returns 1 when the voucher was loaded, 0 when it already existed (nothing
-- changes: loading again never resets a sale's remaining stock).
if #KEYS ~= 1 or #ARGV ~= 5 then
  return redis.error_reply("load_voucher.lua: expects 1 KEY and 5 ARGV")
end
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1],
  "stock", ARGV[1], "remaining", ARGV[1],
  "begins_ms", ARGV[2], "ends_ms", ARGV[3], "limit", ARGV[4], "hold_seconds", ARGV[5])
return 1
