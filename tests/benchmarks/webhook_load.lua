-- wrk: each thread posts its own share of pre-signed, unique webhook deliveries (written by bench_table.py,
-- one a line: id, timestamp, signature, body), so every request is a new event the portal must store.
local next_thread = 0

function setup(thread)
  thread:set("share", next_thread)
  next_thread = next_thread + 1
end

function init(args)
  deliveries, position = {}, 0
  local line_number = 0
  for line in io.lines(os.getenv("DELIVERIES")) do
    if line_number % 2 == share then
      local id, stamp, signature, body = line:match("([^\t]+)\t([^\t]+)\t([^\t]+)\t(.*)")
      local headers = {
        ["webhook-id"] = id,
        ["webhook-timestamp"] = stamp,
        ["webhook-signature"] = signature,
        ["content-type"] = "application/json",
      }
      deliveries[#deliveries + 1] = wrk.format("POST", nil, headers, body)
    end
    line_number = line_number + 1
  end
end

function request()
  position = position % #deliveries + 1
  return deliveries[position]
end
