-- remove_published.lua: acknowledges and deletes outbox entries the broker
-- acknowledged, in one step.
--
-- One script rather than a MULTI/EXEC pair: on a Redis Cluster a
-- transaction whose stream is migrating between masters is refused whole
-- (EXECABORT) without the redirection a client follows, while a script is
-- one command, redirected (ASK, MOVED) like any other. Atomic all the same:
-- an entry is never left deleted but pending, or acknowledged but kept.
--
-- KEYS[1]  outbox stream   <prefix>:outbox, or a bucket's <prefix>:{t}:outbox on a cluster
-- ARGV[1]  consumer group
-- ARGV[2…] entry ids (at least one)
--
-- Returns the number of entries deleted.
if #KEYS ~= 1 or #ARGV < 2 then
  return redis.error_reply("remove_published.lua: expects 1 KEYS and at least 2 ARGV")
end
local ids = {unpack(ARGV, 2)}
redis.call("XACK", KEYS[1], ARGV[1], unpack(ids))
return redis.call("XDEL", KEYS[1], unpack(ids))
