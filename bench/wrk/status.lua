-- wrk script for status polling: owners each reading their own order with
-- their own token. $ORDERS names a file of "token order_id" lines (made by
-- `live-probe place`), taken in turn.
local owners = {}
local next_owner = 0

function init(args)
  local path = os.getenv("ORDERS") or error("set ORDERS to a file of 'token order_id' lines")
  for line in io.lines(path) do
    local token, order = line:match("^(%S+) (%S+)$")
    if token then
      owners[#owners + 1] = { "/api/v1/orders/" .. order, { ["Authorization"] = "Bearer " .. token } }
    end
  end
  next_owner = math.random(#owners) - 1
end

function request()
  next_owner = next_owner % #owners + 1
  local owner = owners[next_owner]
  return wrk.format("GET", owner[1], owner[2])
end
