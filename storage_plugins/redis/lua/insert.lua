-- KEYS: alive, heads, grants[, waits][, graves] (helpers: optional). ARGV: gen, prefix,
-- then the batch as columns (columns.py): ids, their lengths, timestamps and
-- buckets (comma-separated decimals), the records (record.new_records: each
-- with its payload inline, or marked apart), their lengths, and the payloads
-- kept apart, their lengths and their indexes in the batch (1-based), the keys
-- of the messages that go on their key's lane (keys.lane), their lengths and
-- indexes, and the headers of those that have some, their lengths and indexes;
-- then what to do with an id already there ('' keep, 'replace', 'extend':
-- Storage.insert's on_duplicate, each id once in the batch) and now.
-- Reply {OK, status...}: 0 accepted, 1 duplicate (an existing id, live or dead,
-- a tombstoned one, or an earlier one of this batch: the first wins), with
-- replace or extend 3 replaced, 4 extended, 5 leased (helpers: on_duplicate).
if not alive() then return {GONE} end
local prefix, extra = ARGV[2], optional(4)
local mode, now = ARGV[18], tonumber(ARGV[19])
local changed, changes, ended = {}, {ids = {}, recs = {}}, {}  -- ended: helpers' unlease
local graves, waits = extra.graves, extra.waits
local ids, stamps, buckets = cut(ARGV[3], ARGV[4]), decimals(ARGV[5]), decimals(ARGV[6])
local packed = cut(ARGV[7], ARGV[8])
local apart, bodies = {}, cut(ARGV[9], ARGV[10])
for i, at in ipairs(decimals(ARGV[11])) do apart[tonumber(at)] = bodies[i] end
local laned, named = {}, cut(ARGV[12], ARGV[13])
for i, at in ipairs(decimals(ARGV[14])) do laned[tonumber(at)] = named[i] end
local headed, blobs = {}, cut(ARGV[15], ARGV[16])
for i, at in ipairs(decimals(ARGV[17])) do headed[tonumber(at)] = blobs[i] end
local out = {OK}
local records, payloads, headers, timelines, earliest, pending = {}, {}, {}, {}, {}, {}
local entered = {}
-- Duplicates are looked for in one call: HMGET over the records, which holds
-- the tombstones too (keys.GRAVES; one left while the topic keeps none is
-- written over); a repeat within the batch is found in `seen`.
local existing = collect('HMGET', prefix .. K_RECORDS, ids)
local seen = {}
for i = 1, #ids do
  local id, ts, bucket = ids[i], stamps[i], buckets[i]
  local lane = laned[i] and bucket .. ':' .. laned[i] or bucket
  local status = 0
  local tombstone = existing[i] and not stored(existing[i])
  if seen[id] or (tombstone and graves) then
    status = 1
  elseif existing[i] and not tombstone then
    status = 1
    if mode ~= '' then
      local rec = decode(existing[i])
      status = on_duplicate(mode, rec, now)
      if status == 3 then  -- replaced: stored again below, its version and deliveries kept
        drop(prefix, id, rec, ended, changed)
        local new = decode(packed[i])
        new.v, new.n = rec.v + 1, rec.n
        packed[i] = encode(new)
      elseif status == 4 then  -- extended: its due time only
        if rec.o then unlease(ended, rec.ts, rec.o) end
        reschedule(prefix, KEYS[2], waits, id, rec, ts, changed, changes)
        rec.o = nil
      end
    end
  end
  if status ~= 0 and status ~= 3 then
    out[#out + 1] = status
  else
    seen[id] = true
    local n = tonumber(ts)
    local at = #records  -- in place: push's call costs a message more
    records[at + 1], records[at + 2] = id, packed[i]
    if apart[i] then push(payloads, id, apart[i]) end
    if headed[i] then push(headers, id, headed[i]) end
    entered[bucket] = true
    local entries = timelines[lane]
    if not entries then
      entries = {}
      timelines[lane] = entries
    end
    at = #entries
    entries[at + 1], entries[at + 2] = ts, id
    local low = earliest[lane]  -- {number, text}
    if not low then
      earliest[lane] = {n, ts}
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
    out[#out + 1] = status
  end
end
flush(prefix, changes)
settle_grants(prefix, KEYS[3], ended)
bulk('HSET', prefix .. K_RECORDS, records)
bulk('HSET', prefix .. K_PAYLOADS, payloads)
bulk('HSET', prefix .. K_HEADERS, headers)
local heads, unranked = {}, {}
for lane, entries in pairs(timelines) do
  bulk('ZADD', timeline(prefix, lane), entries)
  push(heads, earliest[lane][2], lane)
end
-- A scan's kept order lacks them: each bucket's count bumped, read and
-- written in one call each rather than a HINCRBY a bucket.
local bumped = {}
for bucket in pairs(entered) do
  bumped[#bumped + 1] = bucket
  if pending[bucket] then push(unranked, pending[bucket][2], bucket) end
end
local counts, bumps = collect('HMGET', prefix .. K_ENTERED, bumped), {}
for i, bucket in ipairs(bumped) do push(bumps, bucket, int((tonumber(counts[i]) or 0) + 1)) end
bulk('HSET', prefix .. K_ENTERED, bumps)
lowered_all(KEYS[2], heads)
if waits then lowered_all(waits, unranked) end  -- helpers: waiting
fix_heads(prefix, KEYS[2], changed)  -- after the adds: a lane a replace left may be empty
return out
