-- settle.lua: tells whether an order id was admitted, and makes the answer
-- final. The ingress calls it when its admit.lua call failed without an
-- answer (a timeout, a dropped connection): the script may have run, or may
-- still run later (the call is in flight, or queued behind a slow Redis).
-- The keys are those of the bucket the call went to: the user's own.
--
-- KEYS[1]  voucher hash   <prefix>:{v:<id>}:voucher   (read: ends_ms)
-- KEYS[2]  admitted hash  <prefix>:{v:<id>}:admitted  order id -> "<user id>|<quantity>", or "fenced"
-- ARGV[1]  the order id the ingress generated for the request
-- ARGV[2]  milliseconds the voucher's keys outlive its sale: a fence expires
--          with the sale, or this long after it was set when the voucher is
--          not in Redis (it may be loaded in the meantime; loading keeps it)
--
-- Returns "admitted" when admit.lua admitted the order, or "not_admitted",
-- having fenced the id first: admit.lua refuses a fenced id before changing
-- anything, so a call that runs after this one can no longer admit it, and
-- "not admitted" stays true.
--
-- Either way the id's record is written (again, when it was there: the same
-- value), so a WAIT the caller sends behind this call on its connection
-- (gate/src/replica_acks.rs) covers the record, written maybe over another
-- connection (Redis after 7.0 has WAIT cover a connection's writes only,
-- not its reads).
if #KEYS ~= 2 or #ARGV ~= 2 then
  return redis.error_reply("settle.lua: expects 2 KEYS and 2 ARGV")
end
if ARGV[1] == "" then
  return redis.error_reply("settle.lua: the order id must not be empty")
end
local recorded = redis.call("HGET", KEYS[2], ARGV[1])
if recorded then
  redis.call("HSET", KEYS[2], ARGV[1], recorded)
end
if recorded and recorded ~= "fenced" then
  return "admitted"
end
if not recorded then
  redis.call("HSET", KEYS[2], ARGV[1], "fenced")
  local ends = redis.call("HGET", KEYS[1], "ends_ms")
  if ends then
    redis.call("PEXPIREAT", KEYS[2], tonumber(ends) + tonumber(ARGV[2]))
  else
    redis.call("PEXPIRE", KEYS[2], ARGV[2])
  end
end
return "not_admitted"
