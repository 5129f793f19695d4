-- retire_consumers.lua: removes the outbox group's consumers left by relays
-- that are gone: those with no pending entry, idle longer than a bound.
-- A relay's consumer name is unique per process, so every restart leaves
-- one behind; without this they would pile up in the group for good.
--
-- In one script, so the check and the removal are atomic: a consumer that
-- read entries after being looked at is never removed with them (XGROUP
-- DELCONSUMER drops a consumer's pending entries, which no relay could then
-- claim). A consumer that still has pending entries stays until another
-- relay has claimed them.
--
-- KEYS[1]  outbox stream   <prefix>:outbox
-- ARGV[1]  consumer group
-- ARGV[2]  the calling relay's own consumer, never removed
-- ARGV[3]  least idle time, in milliseconds, of a consumer to remove
--
-- Returns the names of the consumers removed.
if #KEYS ~= 1 or #ARGV ~= 3 then
  return redis.error_reply("retire_consumers.lua: expects 1 KEYS and 3 ARGV")
end
local min_idle = tonumber(ARGV[3])
if not min_idle or min_idle < 0 then
  return redis.error_reply("retire_consumers.lua: the idle bound must be a non-negative number")
end
local removed = {}
for _, consumer in ipairs(redis.call("XINFO", "CONSUMERS", KEYS[1], ARGV[1])) do
  -- Each consumer is a flat field/value list: name, pending, idle (and,
  -- from Redis 7.2, inactive).
  local fields = {}
  for i = 1, #consumer, 2 do
    fields[consumer[i]] = consumer[i + 1]
  end
  if fields["name"] ~= ARGV[2] and fields["pending"] == 0 and fields["idle"] > min_idle then
    redis.call("XGROUP", "DELCONSUMER", KEYS[1], ARGV[1], fields["name"])
    removed[#removed + 1] = fields["name"]
  end
end
return removed
