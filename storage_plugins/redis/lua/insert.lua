-- KEYS: alive, heads[, waits][, tombs] (helpers: optional). ARGV: gen, prefix,
-- then the batch as columns (columns.py): ids, their lengths, timestamps,
-- buckets, max deliveries, expiries (comma-separated decimals), payloads, their
-- lengths, priorities ('' when all are 0).
-- Reply {OK, status...}: 0 accepted, 1 duplicate (an existing id, live or dead,
-- a tombstoned one, or an earlier one of this batch: the first wins).
if not alive() then return {GONE} end
local prefix, extra = ARGV[2], optional(3)
local tombs, waits = extra.tombs, extra.waits
local ids, stamps, buckets = cut(ARGV[3], ARGV[4]), decimals(ARGV[5]), decimals(ARGV[6])
local mds, exs, bodies = decimals(ARGV[7]), decimals(ARGV[8]), cut(ARGV[9], ARGV[10])
local priorities = decimals(ARGV[11])
local out = {OK}
local payloads, timelines, earliest, pending = {}, {}, {}, {}
-- Duplicates are looked for in one call each: EXISTS over all the record keys
-- (a count: only when it is not 0 does each id ask again) and ZMSCORE over the
-- tombstones; a repeat within the batch is found in `seen`.
local records, seen = {}, {}
for i = 1, #ids do records[i] = prefix .. K_RECORD .. ids[i] end
local existing = 0
for i = 1, #records, 1000 do
  existing = existing + redis.call('EXISTS', unpack(records, i, math.min(i + 999, #records)))
end
local buried = tombs and collect('ZMSCORE', tombs, ids) or {}
for i = 1, #ids do
  local id, ts, bucket, key = ids[i], stamps[i], buckets[i], records[i]
  if seen[id] or buried[i] or (existing > 0 and redis.call('EXISTS', key) == 1) then
    out[#out + 1] = 1
  else
    seen[id] = true
    -- Text, not numbers: Redis would format each number as a double.
    redis.call('HSET', key, 'ts', ts, 'v', '1', 'n', '0', 'b', bucket,
               'md', mds[i], 'ex', exs[i], 'dead', '0')
    if priorities[i] and priorities[i] ~= '0' then redis.call('HSET', key, 'p', priorities[i]) end
    push(payloads, prefix .. K_PAYLOAD .. id, bodies[i])
    local entries = timelines[bucket]
    if not entries then
      entries = {}
      timelines[bucket] = entries
    end
    push(entries, ts, id)
    local n = tonumber(ts)
    local low = earliest[bucket]  -- {number, text}
    if not low then
      earliest[bucket] = {n, ts}
    elseif n < low[1] then
      low[1], low[2] = n, ts
    end
    if n >= 0 then  -- the earliest not ranked (helpers: waiting)
      low = pending[bucket]
      if not low then
        pending[bucket] = {n, ts}
      elseif n < low[1] then
        low[1], low[2] = n, ts
      end
    end
    out[#out + 1] = 0
  end
end
bulk('MSET', nil, payloads)
local heads, unranked = {}, {}
for bucket, entries in pairs(timelines) do
  bulk('ZADD', timeline(prefix, bucket), entries)
  redis.call('HINCRBY', prefix .. K_ENTERED, bucket, 1)  -- a scan's kept order lacks them
  push(heads, earliest[bucket][2], bucket)
  if pending[bucket] then push(unranked, pending[bucket][2], bucket) end
end
lowered_all(KEYS[2], heads)
if waits then lowered_all(waits, unranked) end  -- helpers: waiting
return out
