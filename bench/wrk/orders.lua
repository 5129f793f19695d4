-- wrk script for the sold-out storm: order requests from many users, each
-- with its own signed token (one per line in the file named by $TOKENS, made
-- by `seckill token storm- --count N`), taken in turn.
local tokens = {}
local next_token = 0

function init(args)
  local path = os.getenv("TOKENS") or error("set TOKENS to a file of user tokens")
  for line in io.lines(path) do
    tokens[#tokens + 1] = line
  end
  -- Each wrk thread starts at a different place in the list.
  next_token = math.random(#tokens) - 1
end

function request()
  next_token = next_token % #tokens + 1
  return wrk.format("POST", nil, { ["Authorization"] = "Bearer " .. tokens[next_token] }, "")
end
