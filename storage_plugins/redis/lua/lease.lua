-- KEYS: alive, heads, owned, dead, dead-ids, stray-homes[, waits][, tombs: an
-- at-most-once delivery leaves a tombstone] (helpers: optional).
-- ARGV: gen, prefix, now, quota, bound, lease until, owner, max deliveries (the
-- topic's), solo ('1': refuse with STRAYS when strays of the slot's buckets live
-- in other slots), asked buckets ('*' or 'lo-hi,...').
-- Takes the slot's messages of the asked buckets with timestamp <= bound (the
-- pass's bound, or less when merging slots), earliest first across its
-- timelines (walking `heads`), until
-- `quota` are delivered; dead letters do not count against the quota.
-- Reply {OK, dead lettered, numbers, blob}: per delivery its numbers (bucket,
-- due timestamp, version, deliveries, priority, id length, payload length) as
-- little-endian doubles (K_NUMBERS; formatting them as text cost more than
-- the rest of a delivery), and the id then the payload in the blob.
if not alive() then return {GONE} end
if ARGV[9] == '1' and redis.call('SCARD', KEYS[6]) > 0 then return {STRAYS} end
local prefix, now_s, quota, bound = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local lease_until, owner, topic_max = ARGV[6], ARGV[7], tonumber(ARGV[8])
local extra = optional(7)
local now, until_n = tonumber(now_s), tonumber(lease_until)
local numbers, blob, leased, owned, changed, buried = {}, {}, {}, {}, {}, {}
-- Records as stored (packed: unpacked where visited, with no table on the
-- common path), and the records rewritten, (id, record) pairs for one HSET.
local recs, written, changes = {}, {}, {ids = {}, recs = {}}
-- Per delivery its id and payload (false for one kept apart, until one HMGET
-- after the walk reads them), and the ids whose payloads to read.
local sent, payloads, unread = {}, {}, {}
local dead = 0

local function fetch(ids)
  local packed = collect('HMGET', prefix .. K_RECORDS, ids)
  for i = 1, #ids do recs[ids[i]] = packed[i] end
end

local function visit(bucket, id)
  local packed = recs[id]
  if not packed then
    redis.call('ZREM', timeline(prefix, bucket), id)  -- an index entry without a record
    left(changed, bucket, 0)
    return false, false
  end
  local ts, v, n, b, md, ex, flags, p, olen, at = struct.unpack(K_RECORD, packed)
  left(changed, bucket, ts)
  local fate = lease_fate(n, md, topic_max, ex, math.max(now, ts))  -- at delivery
  if fate == 'kill' then
    kill(prefix, id, decode(packed), now_s, KEYS[3], KEYS[4], KEYS[5], changed, changes)
    dead = dead + 1
    return false, false
  end
  v, n = v + 1, n + 1
  sent[#sent + 1] = id
  if fate == 'drop' then
    local rec = decode(packed)
    local payload = payload_of(prefix, id, rec)  -- drop deletes it
    payloads[#sent] = payload
    numbers[#sent] = struct.pack(K_NUMBERS, bucket, ts, v, n, p, #id, #payload)
    drop(prefix, id, rec, KEYS[3], changed)  -- at-most-once: gone once delivered
    push(buried, now_s, id)
    return false, true
  end
  local body = string.sub(packed, at + olen)
  if flags >= 2 then  -- apart: read after the walk, its numbers packed then
    payloads[#sent] = false
    numbers[#sent] = {bucket, ts, v, n, p, #id}
    unread[#unread + 1] = id
  else
    payloads[#sent] = body
    numbers[#sent] = struct.pack(K_NUMBERS, bucket, ts, v, n, p, #id, #body)
  end
  push(written, id, struct.pack(K_RECORD, until_n, v, n, b, md, ex, flags, p, #owner) .. owner
                    .. body)
  -- Moved to the lease expiry at the end (one ZADD per timeline); until then
  -- it stays in range, skipped by the walk's offset.
  local entries = leased[bucket]
  if not entries then
    entries = {}
    leased[bucket] = entries
  end
  push(entries, lease_until, id)
  push(owned, lease_until, id)
  return true, true
end

-- When all that is due fits the quota (the steady case), each due timeline is
-- read once and its members visited as read: the pass takes them all, so the
-- merge in time order (walk) would only cost a heap step a message. Otherwise
-- the reads stop one past the quota (nothing written yet) and the walk runs.
local heap, buckets = due_heads(KEYS[2], asked(ARGV[10]), bound)
local due, room = {}, quota + 1
for i = 1, #buckets do
  local r = redis.call('ZRANGE', timeline(prefix, buckets[i]), '-inf', bound, 'BYSCORE',
                       'LIMIT', 0, room)
  due[i] = r
  room = room - #r
  if room <= 0 then break end
end
if room > 0 then
  for i = 1, #buckets do
    local ids = due[i]
    if #ids > 0 then
      fetch(ids)
      for j = 1, #ids do visit(buckets[i], ids[j]) end
    end
  end
else
  walk(prefix, heap, '-inf', bound, quota, visit, nil, fetch)
end
for bucket, entries in pairs(leased) do
  bulk('ZADD', timeline(prefix, bucket), entries)
  waiting(extra.waits, bucket, lease_until)
end
bulk('ZADD', KEYS[3], owned)
bulk('HSET', prefix .. K_RECORDS, written)
flush(prefix, changes)
local read, next_read = collect('HMGET', prefix .. K_PAYLOADS, unread), 1
for i, id in ipairs(sent) do
  local payload = payloads[i]
  if payload == false then
    payload = read[next_read] or ''
    next_read = next_read + 1
    local k = numbers[i]
    numbers[i] = struct.pack(K_NUMBERS, k[1], k[2], k[3], k[4], k[5], k[6], #payload)
  end
  push(blob, id, payload)
end
fix_heads(prefix, KEYS[2], changed)
bury(extra.tombs, buried)
return {OK, dead, table.concat(numbers), table.concat(blob)}
