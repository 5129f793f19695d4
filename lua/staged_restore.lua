-- staged_restore.lua: the staging that draw_restore.lua and queue_restore.lua
-- share, written once. It is no script of its own: the gate puts this text
-- before each of those two when it loads them (gate/src/gate.rs), so it only
-- defines a constant and local functions, which read KEYS and ARGV when
-- called; each script's contract and arity check stay at the top of its own
-- file and run first. Both scripts take the same keys here: KEYS[3..6] the
-- keys a rebuild replaces, KEYS[7..10] their staging keys (KEYS[10] the
-- open entries or wins, a sorted set).

-- A rebuild that stops half way leaves its staging keys for this long only.
local STAGING_MS = 3600000

-- The holds step: ARGV[3..] pairs (entry or rank, its end in ms) staged.
local function stage_holds()
  for i = 3, #ARGV, 2 do
    redis.call("ZADD", KEYS[10], ARGV[i + 1], ARGV[i])
  end
  redis.call("PEXPIRE", KEYS[10], STAGING_MS)
end

-- The last step: the staged keys replace whatever the own keys held, each
-- expiring at `expires` (what is left of the lost room without its hash is
-- not mixed in; a staged key that is absent had nothing: its own key goes
-- too).
local function move_staged_in(expires)
  for k = 3, 6 do
    if redis.call("EXISTS", KEYS[k + 4]) == 1 then
      redis.call("RENAME", KEYS[k + 4], KEYS[k])
      redis.call("PEXPIREAT", KEYS[k], expires)
    else
      redis.call("DEL", KEYS[k])
    end
  end
end
