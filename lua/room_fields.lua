-- room_fields.lua: the fields a waiting room is opened with, written once for
-- queue_open.lua (a room opened) and queue_restore.lua (a room rebuilt from
-- the log). It is no script of its own: the gate puts this text before each
-- of those two when it loads them (gate/src/gate.rs), so it reads no KEYS or
-- ARGV and only defines a local function; each script's contract and arity
-- check stay at the top of its own file and run first.
--
-- A waiting room's hash <prefix>:{v:<id>}:room: seed, token_key, opens_ms, factor_percent,
-- entry_rate, idle_ms, token_ms, committed ("1" once the seed's hash is in the log), revealed,
-- cursor, issued, expired, seq, joined, rate_ms; with a beacon (queue_advance.lua says what they
-- hold): beacon_round, beacon_chain, beacon_wait, closed, pre_hashed, pre_chain, reveal_extra.
-- The window clock's fields (lost_ms, alive_ms, stalled_ms, stall_reason) are window_clock.lua's.

-- The room hash of a room opened now with nobody in it, as HSET's field/value
-- list: a seed not committed yet, nothing revealed, served or joined; with a
-- beacon round (beacon_round neither nil nor ""), waiting for it with its
-- pre-queue not hashed yet.
local function room_fields(seed, token_key, opens_ms, factor_percent, entry_rate, idle_ms, token_ms,
                           beacon_round, beacon_chain)
  local fields = {"seed", seed, "token_key", token_key, "opens_ms", opens_ms, "factor_percent", factor_percent,
    "entry_rate", entry_rate, "idle_ms", idle_ms, "token_ms", token_ms, "committed", "0", "revealed", "0",
    "cursor", "0", "issued", "0", "expired", "0", "seq", "0", "joined", "0"}
  if beacon_round and beacon_round ~= "" then
    for _, value in ipairs({"beacon_round", beacon_round, "beacon_chain", beacon_chain, "beacon_wait", "1",
        "pre_hashed", "0", "pre_chain", ""}) do
      fields[#fields + 1] = value
    end
  end
  return fields
end
