-- KEYS: alive, heads, grants, stray-homes, waits. ARGV: gen, prefix, quota, bound, solo
-- ('1': refuse with STRAYS when strays of the slot's buckets live in other
-- slots), asked buckets ('*' or 'lo-hi,...'), then core.priority's step, the
-- topic's creation time and the rank base.
-- Moves the slot's live messages of the asked buckets with 0 <= timestamp <=
-- bound (available now: a not-before or nack delay come, a lease run out),
-- oldest first across its timelines (walking `waits`, see helpers: waiting),
-- up to `quota`, to their rank: no lease owner, version + 1. Ranks (< 0) are
-- never taken again. The `waits` of each timeline read is made exact.
-- Reply {OK, promoted}.
if not alive() then return {GONE} end
if ARGV[5] == '1' and redis.call('SCARD', KEYS[4]) > 0 then return {STRAYS} end
local prefix, quota, bound = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local step, created_at, base = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local ranked, ended, changed, read = {}, {}, {}, {}  -- ended: helpers' unlease
local promoted = 0
local changes, recs = {ids = {}, recs = {}}, {}

local function fetch(ids)
  load_all(prefix, ids, recs)
end

local function visit(bucket, id)
  local rec = recs[id]
  if not rec then
    redis.call('ZREM', timeline(prefix, bucket), id)  -- an index entry without a record
    left(changed, bucket, 0)
    return false, false
  end
  local at = rank(rec.p, rec.ts, step, created_at, base)
  local old = rec.ts
  if rec.o then unlease(ended, rec.ts, rec.o) end
  rec.ts, rec.v, rec.o = tonumber(at), rec.v + 1, nil
  dirty(changes, id, rec)
  -- Moved to its rank at the end (one ZADD per timeline); until then it
  -- stays in range, skipped by the walk's offset.
  local entries = ranked[bucket]
  if not entries then
    entries = {}
    ranked[bucket] = entries
  end
  push(entries, at, id)
  left(changed, bucket, old)
  lowered(KEYS[2], bucket, at)
  read[bucket] = true
  promoted = promoted + 1
  return true, true
end

local heap = due_heads(KEYS[5], asked(ARGV[6]), bound)
walk(prefix, heap, '0', bound, quota, visit, function(bucket) read[bucket] = true end, fetch)
flush(prefix, changes)
for bucket, entries in pairs(ranked) do bulk('ZADD', timeline(prefix, bucket), entries) end
settle_grants(prefix, KEYS[3], ended)
fix_heads(prefix, KEYS[2], changed)
for bucket in pairs(read) do
  local first = redis.call('ZRANGE', timeline(prefix, bucket), '0', '+inf', 'BYSCORE',
                           'LIMIT', 0, 1, 'WITHSCORES')
  if first[1] then
    redis.call('ZADD', KEYS[5], first[2], bucket)
  else
    redis.call('ZREM', KEYS[5], bucket)
  end
end
return {OK, promoted}
