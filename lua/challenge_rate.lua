-- challenge_rate.lua: adds the proofs of work one ingress saw spent for a
-- voucher since its last call to the voucher's per-second count shared by
-- every ingress, and reads the count back, so the difficulty follows the
-- rate of proofs the whole platform sees spent (not challenges handed out,
-- which cost nothing to ask for), not each ingress's share behind a
-- balancer. Each ingress calls it at most once a second per voucher, not
-- per proof. It also answers the Redis clock, which the ingress dates its
-- challenges' expiry by: the admission scripts judge that expiry by the
-- same clock (TIME), so one clock decides.
--
-- KEYS[1]  rate hash  <prefix>:{v:<id>}:challenge_rate  Unix second (Redis clock) -> proofs spent
-- ARGV[1]  proofs spent since this caller's last call (integer >= 0)
--
-- Returns {last_second, this_second, now_ms}: the counts of the previous
-- whole second and of the current one so far, and the Redis clock (Unix
-- ms), as strings.
if #KEYS ~= 1 or #ARGV ~= 1 then
  return redis.error_reply("challenge_rate.lua: expects 1 KEYS and 1 ARGV")
end
local counted = tonumber(ARGV[1])
if not counted or counted < 0 or counted ~= math.floor(counted) then
  return redis.error_reply("challenge_rate.lua: ARGV[1] must be a whole number >= 0")
end
local clock = redis.call("TIME")
local now = tonumber(clock[1])
local now_ms = now * 1000 + math.floor(tonumber(clock[2]) / 1000)
local this_second = tonumber(redis.call("HINCRBY", KEYS[1], tostring(now), counted))
local last_second = tonumber(redis.call("HGET", KEYS[1], tostring(now - 1)) or "0")
-- Older seconds are of no use: at most a handful of fields live.
for _, second in ipairs(redis.call("HKEYS", KEYS[1])) do
  if tonumber(second) < now - 1 then
    redis.call("HDEL", KEYS[1], second)
  end
end
redis.call("PEXPIRE", KEYS[1], 5000)
return {tostring(last_second), tostring(this_second), string.format("%d", now_ms)}
