-- KEYS: alive, heads. ARGV: gen, prefix, then per message:
-- id, ts, bucket, max_deliveries, expires_at, payload.
-- Reply {OK, status...}: 0 accepted, 1 duplicate (an existing id, live or dead,
-- or an earlier one of this batch: the first wins).
if not alive() then return {GONE} end
local prefix = ARGV[2]
local out = {OK}
local payloads, timelines, earliest = {}, {}, {}
for i = 3, #ARGV, 6 do
  local id, ts, bucket = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local key = prefix .. K_RECORD .. id
  if redis.call('EXISTS', key) == 1 then
    out[#out + 1] = 1
  else
    -- The record now, so a repeat of the id later in the batch is a duplicate.
    redis.call('HSET', key, 'ts', ts, 'v', 1, 'n', 0, 'b', bucket,
               'md', ARGV[i + 3], 'ex', ARGV[i + 4], 'dead', 0)
    push(payloads, prefix .. K_PAYLOAD .. id, ARGV[i + 5])
    local entries = timelines[bucket]
    if not entries then
      entries = {}
      timelines[bucket] = entries
    end
    push(entries, ts, id)
    local n = tonumber(ts)
    if not earliest[bucket] or n < tonumber(earliest[bucket]) then earliest[bucket] = ts end
    out[#out + 1] = 0
  end
end
bulk('MSET', nil, payloads)
for bucket, entries in pairs(timelines) do
  bulk('ZADD', timeline(prefix, bucket), entries)
  lowered(KEYS[2], bucket, earliest[bucket])
end
return out
