-- release.lua: gives an admitted order's units back to the gate, exactly once.
-- Used by the processor's gate follower (processor/src/gate_follower.rs) for
-- every order the processor failed or cancelled, so the stock Redis took for
-- it can be sold again. The keys are those of the order's bucket, its user's
-- own ({v:<id>} for a voucher not split into buckets), so the units go back
-- where they were taken and the user's count is the one admit.lua checks.
--
-- KEYS[1]  voucher hash   <prefix>:{v:<id>}:voucher
-- KEYS[2]  bought hash    <prefix>:{v:<id>}:bought
-- KEYS[3]  orders hash    <prefix>:{v:<id>}:orders
-- KEYS[4]  released set   <prefix>:{v:<id>}:released   order ids already released
-- KEYS[5]  retries hash    <prefix>:{v:<id>}:retries
-- KEYS[6]  admitted hash  <prefix>:{v:<id>}:admitted  order id -> "<user id>|<quantity>" (admit.lua),
--                                                   or "fenced"
-- ARGV[1]  user id
-- ARGV[2]  quantity the order took
-- ARGV[3]  order id
-- ARGV[4]  "<user id>|<Idempotency-Key>" of the request that admitted it, or
--          "": forgets the key, so a retry of an order that never reached the
--          log is admitted afresh
-- ARGV[5]  milliseconds the voucher's keys outlive its sale (the released
--          set expires at ends_ms + this, like the voucher's other keys)
--
-- Returns 1 when the units were returned, 0 when this order was released
-- before (a retry changes nothing), the voucher is not in Redis, or this
-- Redis never admitted the order.
--
-- Units go back only for an order this Redis admitted, as this user's
-- order of this quantity (its admitted record, written by admit.lua or
-- restore.lua). An order can reach the log without one: admit.lua ran on a
-- master whose outbox was relayed, and the master's writes were lost in a
-- failover before they reached the replica promoted in its place. Giving
-- back units this Redis never took would put its stock ahead of the real
-- one, and it would admit orders the processor then fails. Such an order
-- is still marked released (a restore must not count it as holding), and
-- its id fenced as settle.lua fences one: an admit.lua call for it that
-- arrives late is refused instead of taking units for an order that is
-- over.
--
-- The caller may follow this call with WAIT (gate/src/replica_acks.rs): the
-- release counts once a replica has it. A repeat (the first call's answer
-- was not acknowledged) that finds the order released writes the released
-- set's expiry again, so that a WAIT on a Redis after 7.0, which covers a
-- connection's writes only, still covers the first call's write.
--
-- A voucher missing from Redis (it lost its data, and reconcile has not
-- restored it yet) gets no units, but the order is still recorded as
-- released: a restore whose read of the log came before this release then
-- keeps the units returned (restore.lua takes the released set into
-- account), instead of giving them to the order for good.
if #KEYS ~= 6 or #ARGV ~= 5 then
  return redis.error_reply("release.lua: expects 6 KEYS and 5 ARGV")
end
local quantity = tonumber(ARGV[2])
if not quantity or quantity < 1 then
  return redis.error_reply("release.lua: quantity must be a positive integer")
end
-- A voucher Redis does not have (never had: an order the processor failed
-- as unknown; or lost) has nothing to give back; never create a partial
-- voucher hash. Its end is unknown here, so the mark expires ARGV[5] ms
-- from now: past any restore that could need it.
if redis.call("EXISTS", KEYS[1]) == 0 then
  redis.call("SADD", KEYS[4], ARGV[3])
  redis.call("PEXPIRE", KEYS[4], tonumber(ARGV[5]))
  return 0
end
-- Admitted, but not as this user's order of this quantity: the caller is
-- wrong, not the record; nothing changes, so the right call still can.
local recorded = redis.call("HGET", KEYS[6], ARGV[3])
local admitted = recorded == ARGV[1] .. "|" .. ARGV[2]
if recorded and recorded ~= "fenced" and not admitted then
  return 0
end
local expires = tonumber(redis.call("HGET", KEYS[1], "ends_ms")) + tonumber(ARGV[5])
local first = redis.call("SADD", KEYS[4], ARGV[3]) == 1
-- Written on a repeat too, the same value: the write a WAIT behind this
-- call covers (below).
redis.call("PEXPIREAT", KEYS[4], expires)
if not first then
  return 0
end
if not admitted then
  if not recorded then
    redis.call("HSET", KEYS[6], ARGV[3], "fenced")
    redis.call("PEXPIREAT", KEYS[6], expires)
  end
  return 0
end
redis.call("HINCRBY", KEYS[1], "remaining", quantity)
if redis.call("HINCRBY", KEYS[2], ARGV[1], -quantity) <= 0 then
  redis.call("HDEL", KEYS[2], ARGV[1])
end
if redis.call("HGET", KEYS[3], ARGV[1]) == ARGV[3] then
  redis.call("HDEL", KEYS[3], ARGV[1])
end
-- A hash emptied here is gone, and admit.lua creates it again without an
-- expiry unless told that the keys need theirs set again.
if redis.call("EXISTS", KEYS[2]) == 0 or redis.call("EXISTS", KEYS[3]) == 0 then
  redis.call("HDEL", KEYS[1], "keys_expire_ms")
end
if ARGV[4] ~= "" and redis.call("HGET", KEYS[5], ARGV[4]) == ARGV[3] then
  redis.call("HDEL", KEYS[5], ARGV[4])
end
return 1
