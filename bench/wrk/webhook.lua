-- wrk script for the payment webhook route: the provider's signed callbacks,
-- taken in turn. $BODIES names a file of "SIGNATURE<TAB>BODY" lines (made by
-- `live-probe sign-webhooks`: payment_intent.created events, each with its
-- own event id, which the ingress verifies, reads, checks for a repeat and
-- answers 200 as ignored). The signatures are dated when they were written:
-- the ingress accepts them for its tolerance (300 s by default).
local callbacks = {}
local next_callback = 0

function init(args)
  local path = os.getenv("BODIES") or error("set BODIES to a file of 'SIGNATURE<TAB>BODY' lines")
  for line in io.lines(path) do
    local signature, body = line:match("^([^\t]+)\t(.+)$")
    if signature then
      callbacks[#callbacks + 1] = {
        { ["Stripe-Signature"] = signature, ["Content-Type"] = "application/json" },
        body,
      }
    end
  end
  if #callbacks == 0 then
    error("no signed callbacks in " .. path)
  end
  -- Each wrk thread starts at a different place in the list.
  next_callback = math.random(#callbacks) - 1
end

function request()
  next_callback = next_callback % #callbacks + 1
  local callback = callbacks[next_callback]
  return wrk.format("POST", nil, callback[1], callback[2])
end
