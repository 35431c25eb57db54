-- KEYS: alive, heads, owned, dead, dead-ids, stray-homes[, waits][, tombs: an
-- at-most-once delivery leaves a tombstone] (helpers: optional).
-- ARGV: gen, prefix, now, quota, bound, lease until, owner, max deliveries (the
-- topic's), solo ('1': refuse with STRAYS when strays of the slot's buckets live
-- in other slots), asked buckets ('*' or 'lo-hi,...').
-- Takes the slot's messages of the asked buckets with timestamp <= bound (the
-- pass's bound, or less when merging slots), earliest first across its
-- timelines (walking `heads`), until
-- `quota` are delivered; dead letters do not count against the quota.
-- Reply {OK, dead lettered, numbers, blob}: per delivery the numbers (bucket,
-- due timestamp, version, deliveries, priority, id length, payload length),
-- and the id then the payload in the blob.
if not alive() then return {GONE} end
if ARGV[9] == '1' and redis.call('SCARD', KEYS[6]) > 0 then return {STRAYS} end
local prefix, now_s, quota, bound = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local lease_until, owner, topic_max = ARGV[6], ARGV[7], tonumber(ARGV[8])
local extra = optional(7)
local now = tonumber(now_s)
local numbers, blob, leased, owned, changed, buried = {}, {}, {}, {}, {}, {}
-- Per delivery its id and payload (false until one MGET after the walk reads
-- those still to read), and the payload keys to read.
local sent, payloads, unread = {}, {}, {}
local dead = 0

local function visit(bucket, id)
  local rec = load(prefix, id)
  if not rec then
    redis.call('ZREM', timeline(prefix, bucket), id)  -- an index entry without a record
    left(changed, bucket, 0)
    return false, false
  end
  left(changed, bucket, rec.ts)
  local fate = lease_fate(rec.n, rec.md, topic_max, rec.ex, math.max(now, rec.ts))  -- at delivery
  if fate == 'kill' then
    kill(prefix, id, rec, now_s, KEYS[3], KEYS[4], KEYS[5], changed)
    dead = dead + 1
    return false, false
  end
  local version, deliveries = rec.v + 1, rec.n + 1
  sent[#sent + 1] = id
  -- The delivery's numbers but its payload's length, as one text: integers
  -- through %d cost half what table.concat's number formatting does.
  numbers[#sent] = string.format('%d,%s,%d,%d,%d,%d,', bucket, rec.ts_text, version,
                                 deliveries, rec.p, #id)
  if fate == 'drop' then
    payloads[#sent] = redis.call('GET', prefix .. K_PAYLOAD .. id) or ''  -- drop deletes it
    drop(prefix, id, rec, KEYS[3], changed)  -- at-most-once: gone once delivered
    push(buried, now_s, id)
    return false, true
  end
  payloads[#sent] = false
  unread[#unread + 1] = prefix .. K_PAYLOAD .. id
  redis.call('HSET', prefix .. K_RECORD .. id, 'ts', lease_until, 'o', owner,
             'v', version, 'n', deliveries)
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

local heap = due_heads(KEYS[2], asked(ARGV[10]), bound)
walk(prefix, heap, '-inf', bound, quota, visit)
for bucket, entries in pairs(leased) do
  bulk('ZADD', timeline(prefix, bucket), entries)
  waiting(extra.waits, bucket, lease_until)
end
bulk('ZADD', KEYS[3], owned)
local read, next_read = collect('MGET', nil, unread), 1
for i, id in ipairs(sent) do
  local payload = payloads[i]
  if payload == false then
    payload = read[next_read] or ''
    next_read = next_read + 1
  end
  numbers[i] = string.format('%s%d', numbers[i], #payload)
  push(blob, id, payload)
end
fix_heads(prefix, KEYS[2], changed)
bury(extra.tombs, buried)
return {OK, dead, table.concat(numbers, ','), table.concat(blob)}
