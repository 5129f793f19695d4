-- wrk script for the page storm: GET one voucher. With REVALIDATE=1 each
-- connection sends the ETag of its last answer in If-None-Match, as a
-- browser or CDN revalidating would: 304 while it is current, the new body
-- (and tag) once the representation was rebuilt.
local revalidate = os.getenv("REVALIDATE") == "1"
local etag = nil

function request()
  if revalidate and etag then
    return wrk.format("GET", nil, { ["If-None-Match"] = etag })
  end
  return wrk.format("GET")
end

function response(status, headers, body)
  -- HTTP/1.1 header names arrive as sent: hyper sends them in lower case.
  local tag = headers["etag"] or headers["ETag"]
  if revalidate and tag then
    etag = tag
  end
end
