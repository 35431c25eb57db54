-- Helpers shared by the scripts. Each script gets only those it calls (and
-- what they call), in this order: define a helper after the helpers it calls.
-- Constants (K_*, OK, GONE, ...) come first, from scripts.py.

local function alive()
  return redis.call('GET', KEYS[1]) == ARGV[1]
end

-- Append values (never nil: a nil would leave a hole). Pairs, the common
-- case, take no table; `select(i, ...)` in a loop would copy the values each time.
local function push(t, ...)
  local n, count = #t, select('#', ...)
  if count == 2 then
    local a, b = ...
    t[n + 1], t[n + 2] = a, b
    return
  end
  local values = {...}
  for i = 1, count do t[n + i] = values[i] end
end

-- A column of comma-separated decimals (columns.decimals), as strings.
local function decimals(packed)
  local out = {}
  for d in string.gmatch(packed, '[^,]+') do out[#out + 1] = d end
  return out
end

-- A column of strings packed as one, cut by their lengths (columns.strings).
local function cut(blob, lengths)
  local out, at = {}, 1
  for n in string.gmatch(lengths, '%d+') do
    local stop = at + tonumber(n)
    out[#out + 1] = string.sub(blob, at, stop - 1)
    at = stop
  end
  return out
end

-- The optional keys after the fixed ones (KEYS[first] on), by the last part
-- of their name: 'graves' (keys.GRAVES: deletes leave tombstones) and 'waits'
-- (keys.WAITS: the topic is a priority topic).
local function optional(first)
  local out = {}
  for i = first, #KEYS do out[string.match(KEYS[i], '[^:]+$')] = KEYS[i] end
  return out
end

-- An integer as exact decimal text (tostring would round past 14 digits).
local function int(n)
  return string.format('%d', n)
end

-- The timeline of a lane id (keys.lane: a bucket, or '<bucket>:<key>').
local function timeline(prefix, bucket)
  return prefix .. K_TIMELINE .. bucket
end

-- The bucket of a lane id (heads members: a bucket, or '<bucket>:<key>').
local function lane_bucket(lane)
  return tonumber(string.match(lane, '^%d+'))
end

-- redis.call(cmd, [key,] args...) for a long list of args, in chunks of 1000
-- (even: pairs stay whole): Lua's unpack is bounded, and one call per chunk
-- beats one per item.
local function bulk(cmd, key, args)
  for i = 1, #args, 1000 do
    local last = math.min(i + 999, #args)
    if key then
      redis.call(cmd, key, unpack(args, i, last))
    else
      redis.call(cmd, unpack(args, i, last))
    end
  end
end

-- The replies of `bulk` joined: one list for a long list of args (ZMSCORE, MGET).
-- A missing member or key answers false, which keeps its place in the list.
local function collect(cmd, key, args)
  local out = {}
  for i = 1, #args, 1000 do
    local last = math.min(i + 999, #args)
    local part
    if key then
      part = redis.call(cmd, key, unpack(args, i, last))
    else
      part = redis.call(cmd, unpack(args, i, last))
    end
    for j = 1, #part do out[i + j - 1] = part[j] end
  end
  return out
end

-- Leases are kept by grant (keys.GRANTS): a message whose record names an
-- owner counts in the grant of its timestamp (the lease expiry) and owner.
-- `ended` (grant name -> count) notes a lease a script ends or moves, before
-- its record changes; `settle_grants` takes them off at the end.
local function unlease(ended, ts, owner)
  local g = int(ts) .. ':' .. owner
  ended[g] = (ended[g] or 0) + 1
end

-- Grant `ids` (leased by `owner` until `until_s`, a decimal) in one grant.
local function grant(prefix, grants, until_s, owner, ids)
  if #ids == 0 then return end
  local g = int(tonumber(until_s)) .. ':' .. owner
  bulk('RPUSH', prefix .. K_GRANT .. g, ids)
  redis.call('HINCRBY', prefix .. K_GRANTED, g, #ids)
  redis.call('ZADD', grants, until_s, g)
end

-- The ids the grants `names` leased, each once. A grant's list keeps an id
-- that has since moved on (acked, extended into another grant): callers
-- check each record.
local function granted_ids(prefix, names)
  local ids, seen = {}, {}
  for _, g in ipairs(names) do
    for _, id in ipairs(redis.call('LRANGE', prefix .. K_GRANT .. g, 0, -1)) do
      if not seen[id] then
        seen[id] = true
        ids[#ids + 1] = id
      end
    end
  end
  return ids
end

-- Each grant of `ended` less its ended leases; one left with none is deleted.
local function settle_grants(prefix, grants, ended)
  for g, n in pairs(ended) do
    if redis.call('HINCRBY', prefix .. K_GRANTED, g, -n) <= 0 then
      redis.call('HDEL', prefix .. K_GRANTED, g)
      redis.call('ZREM', grants, g)
      redis.call('UNLINK', prefix .. K_GRANT .. g)
    end
  end
end

-- Whether `flags` (a record's byte) has `bit` (record.py: 1, 2, 4, 8, 16).
local function has(flags, bit)
  return math.floor(flags / bit) % 2 == 1
end

-- A record as stored (record.py: K_RECORD, the owner's bytes, the key, the
-- payload when it is kept inline) as a table, numbers as numbers; `o` nil for
-- no owner, `apart` when the payload is in the slot's `payloads` hash, `k` the
-- key ('' for none), `laned` when it sits on its key's lane, `headed` when it
-- has headers. The inline payload is cut out only when asked
-- (`inline_payload`): an ack never needs it.
local function decode(packed)
  local ts, v, n, b, md, ex, flags, p, olen, at = struct.unpack(K_RECORD, packed)
  local o, k, from = nil, '', at + olen
  if olen > 0 then o = string.sub(packed, at, at + olen - 1) end
  if has(flags, 4) then
    local klen = struct.unpack('<H', packed, from)
    k = string.sub(packed, from + 2, from + 1 + klen)
    from = from + 2 + klen
  end
  return {ts = ts, v = v, n = n, b = b, md = md, ex = ex, dead = flags % 2 == 1, p = p, o = o,
          apart = has(flags, 2), k = k, laned = has(flags, 8), headed = has(flags, 16),
          packed = packed, from = from}
end

-- The lane id of a record's timeline (keys.lane).
local function lane_of(rec)
  if rec.laned then return int(rec.b) .. ':' .. rec.k end
  return rec.b
end

-- The inline payload ('' when apart).
local function inline_payload(rec)
  if not rec.body then rec.body = string.sub(rec.packed, rec.from) end
  return rec.body
end

local function encode(rec)
  local o, k = rec.o or '', rec.k or ''
  local flags = (rec.dead and 1 or 0) + (rec.apart and 2 or 0) + (rec.laned and 8 or 0)
                + (rec.headed and 16 or 0)
  local keyed = ''
  if #k > 0 then
    flags = flags + 4
    keyed = struct.pack('<H', #k) .. k
  end
  return struct.pack(K_RECORD, rec.ts, rec.v, rec.n, rec.b, rec.md, rec.ex, flags, rec.p, #o)
         .. o .. keyed .. inline_payload(rec)
end

-- Set a record's payload: inline up to K_INLINE_MAX bytes, else apart.
local function set_payload(prefix, id, rec, payload)
  if #payload <= K_INLINE_MAX then
    if rec.apart then redis.call('HDEL', prefix .. K_PAYLOADS, id) end
    rec.apart, rec.body = false, payload
  else
    redis.call('HSET', prefix .. K_PAYLOADS, id, payload)
    rec.apart, rec.body = true, ''
  end
end

local function payload_of(prefix, id, rec)
  if rec.apart then return redis.call('HGET', prefix .. K_PAYLOADS, id) or '' end
  return inline_payload(rec)
end

-- Whether a value of `records` is a record (not absent, not a tombstone:
-- keys.GRAVES).
local function stored(packed)
  return packed and #packed ~= K_TOMB_SIZE
end

local function load(prefix, id)
  local packed = redis.call('HGET', prefix .. K_RECORDS, id)
  if not stored(packed) then return nil end
  return decode(packed)
end

-- The records of `ids` into `into` (id -> record; none or a tombstone:
-- absent), one HMGET per 1000 ids.
local function load_all(prefix, ids, into)
  local packed = collect('HMGET', prefix .. K_RECORDS, ids)
  for i = 1, #ids do
    if stored(packed[i]) then into[ids[i]] = decode(packed[i]) end
  end
  return into
end

-- Records a script changed, written together at its end (`flush`): one HSET
-- per 500 records instead of one per message. `changes` is {ids = {}, recs = {}}.
local function dirty(changes, id, rec)
  if not changes.recs[id] then changes.ids[#changes.ids + 1] = id end
  changes.recs[id] = rec
end

local function flush(prefix, changes)
  local args, recs = {}, changes.recs
  for i, id in ipairs(changes.ids) do
    args[2 * i - 1], args[2 * i] = id, encode(recs[id])
  end
  bulk('HSET', prefix .. K_RECORDS, args)
end

-- core.priority.rank, with its step, the topic's creation time and the base
-- passed in by the caller (numbers: every term is an integer below 2^53, so
-- exact), as exact decimal text.
local function rank(priority, available_at, step, created_at, base)
  return int(priority * step + (available_at - created_at) - base)
end

-- The heads index (keys.HEADS: bucket -> earliest score of its timeline) is
-- kept exact in two moves. A member added or moved earlier lowers its head at
-- once (ZADD LT). A member removed or moved later is noted with `left`; at the
-- end `fix_heads` re-reads a timeline's first member only when a noted score
-- was at or below its head (otherwise the head member is still in place).
local function lowered(heads, bucket, score)
  redis.call('ZADD', heads, 'LT', score, bucket)
end

-- `lowered` for many timelines in one call: `entries` holds (score, bucket) pairs.
local function lowered_all(heads, entries)
  for i = 1, #entries, 1000 do
    redis.call('ZADD', heads, 'LT', unpack(entries, i, math.min(i + 999, #entries)))
  end
end

local function left(changed, bucket, score)
  bucket = tonumber(bucket) or bucket  -- a bucket as a number, a key's lane as text: one key
  local low = changed[bucket]
  if not low or score < low then changed[bucket] = score end
end

local function fix_heads(prefix, heads, changed)
  local buckets = {}
  for bucket in pairs(changed) do buckets[#buckets + 1] = bucket end
  if #buckets == 0 then return end
  local scores = collect('ZMSCORE', heads, buckets)  -- one call, not a ZSCORE per bucket
  for i, bucket in ipairs(buckets) do
    local low, head = changed[bucket], tonumber(scores[i])  -- a missing member: false, so nil
    if not head or low <= head then
      local first = redis.call('ZRANGE', timeline(prefix, bucket), 0, 0, 'WITHSCORES')
      if first[1] then
        redis.call('ZADD', heads, first[2], bucket)
      else
        redis.call('ZREM', heads, bucket)
      end
    end
  end
end

-- Delete a live message (ack, cancel, at-most-once delivery); its lease, if
-- any, ends in `ended` (unlease).
local function drop(prefix, id, rec, ended, changed)
  redis.call('HDEL', prefix .. K_RECORDS, id)
  if rec.apart then redis.call('HDEL', prefix .. K_PAYLOADS, id) end
  if rec.headed then redis.call('HDEL', prefix .. K_HEADERS, id) end
  local lane = lane_of(rec)
  redis.call('ZREM', timeline(prefix, lane), id)
  if rec.o then unlease(ended, rec.ts, rec.o) end
  left(changed, lane, rec.ts)
end

-- Write the tombstones of deleted ids (keys.GRAVES): `buried` holds (deleted
-- at, id) pairs; `graves` is the slot's list, or nil when the topic keeps
-- none. Each id's field of `records` becomes its tombstone (its record, if
-- any, is replaced), and the list gets the time and id.
local function bury(prefix, graves, buried)
  if not graves or #buried == 0 then return end
  local fields, entries, time, at = {}, {}, nil, nil
  for i = 1, #buried, 2 do
    if buried[i] ~= time then  -- a batch's are deleted at one time: packed once
      time, at = buried[i], struct.pack(K_TOMB, tonumber(buried[i]))
    end
    fields[i], fields[i + 1] = buried[i + 1], at
    entries[(i + 1) / 2] = at .. buried[i + 1]
  end
  bulk('HSET', prefix .. K_RECORDS, fields)
  bulk('RPUSH', graves, entries)
end

-- Move a live message to the dead timeline at `at` (a decimal string); the
-- record is changed in `changes` (helpers: dirty); its lease, if any, ends in
-- `ended` (unlease).
local function kill(prefix, id, rec, at, ended, dead, dead_ids, changed, changes)
  local lane = lane_of(rec)
  redis.call('ZREM', timeline(prefix, lane), id)
  if rec.o then unlease(ended, rec.ts, rec.o) end
  redis.call('ZADD', dead, at, id)
  redis.call('ZADD', dead_ids, 0, id)
  left(changed, lane, rec.ts)
  rec.dead, rec.ts, rec.v, rec.o = true, tonumber(at), rec.v + 1, nil
  dirty(changes, id, rec)
end

-- A priority topic's `waits` index (keys.WAITS): per bucket, a lower bound of
-- the earliest timestamp >= 0 on its timeline (what promote may rank: ranks
-- are negative), no entry when there is none. Every score >= 0 written to a
-- timeline lowers it at once; only promote raises it, to the exact value, for
-- the timelines it read: so a call that removes a member never has to look.
-- `waits` is nil on a timeline, where promote never runs.
local function waiting(waits, bucket, score)
  if waits and tonumber(score) >= 0 then redis.call('ZADD', waits, 'LT', score, bucket) end
end

-- Put a live message at `at` (a decimal string) on its timeline, version + 1;
-- the record is changed in `changes` (helpers: dirty).
local function reschedule(prefix, heads, waits, id, rec, at, changed, changes)
  local lane = lane_of(rec)
  redis.call('ZADD', timeline(prefix, lane), at, id)
  left(changed, lane, rec.ts)
  lowered(heads, lane, at)
  waiting(waits, rec.b, at)
  rec.ts, rec.v = tonumber(at), rec.v + 1
  dirty(changes, id, rec)
end

-- rules.check_holder (over a record: rules.settle_refusal)
local function check_holder(rec, owner, version)
  if not rec or rec.dead then return NOT_FOUND end
  if rec.o ~= owner then return NOT_HOLDER end
  if rec.v ~= version then return STALE end
  return OK
end

-- rules.check_movable (over a record: rules.move_refusal)
local function check_movable(rec, version, now)
  if not rec or rec.dead then return NOT_FOUND end
  if rec.v ~= version then return STALE end
  if rec.o and rec.ts > now then return LEASED end
  return OK
end

-- rules.on_duplicate over a record (nil: none, a tombstoned id is never
-- asked): mode 'replace' or 'extend'; a status of core.model.InsertStatus.
local function on_duplicate(mode, rec, now)
  if not rec or rec.dead then return 1 end
  if rec.o and rec.ts > now then return 5 end
  if mode == 'replace' then return 3 end
  return 4
end

-- rules.effective_max_deliveries
local function effective_max_deliveries(own, topic)
  if own ~= 0 then return own end
  return topic
end

-- rules.at_most_once
local function at_most_once(max_deliveries)
  return max_deliveries == 1
end

-- rules.dies_on_nack
local function dies_on_nack(deliveries, max_deliveries)
  return max_deliveries ~= 0 and deliveries >= max_deliveries
end

-- rules.dies_on_lease
local function dies_on_lease(deliveries, max_deliveries, expires_at, now)
  if dies_on_nack(deliveries, max_deliveries) then return true end
  return expires_at ~= 0 and expires_at <= now
end

-- rules.lease_fate: 'kill', 'drop' or 'keep' (rules.Fate values).
local function lease_fate(deliveries, own_max, topic_max, expires_at, now)
  local md = effective_max_deliveries(own_max, topic_max)
  if dies_on_lease(deliveries, md, expires_at, now) then return 'kill' end
  if at_most_once(md) then return 'drop' end
  return 'keep'
end

-- A refused item: its code and the record's state, for rules.py to phrase.
local function refusal(numbers, owners, code, rec)
  push(numbers, int(code), int(rec and rec.v or 0), int(rec and rec.ts or 0))
  owners[#owners + 1] = rec and rec.o or ''
end

-- The asked buckets: '*' (all) or sorted 'lo-hi,lo-hi,...' ranges; nil means all.
local function asked(spec)
  if spec == '*' then return nil end
  local ranges = {}
  for lo, hi in string.gmatch(spec, '(%d+)-(%d+)') do
    ranges[#ranges + 1] = {tonumber(lo), tonumber(hi)}
  end
  return ranges
end

local function is_asked(ranges, bucket)
  if not ranges then return true end
  local lo, hi = 1, #ranges
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local r = ranges[mid]
    if bucket < r[1] then
      hi = mid - 1
    elseif bucket > r[2] then
      lo = mid + 1
    else
      return true
    end
  end
  return false
end

-- A min-heap of {score, bucket} by score (ties in any order).
local function heap_push(h, item)
  local i = #h + 1
  h[i] = item
  while i > 1 do
    local parent = math.floor(i / 2)
    if h[parent][1] <= h[i][1] then break end
    h[parent], h[i] = h[i], h[parent]
    i = parent
  end
end

local function heap_pop(h)
  local top, n = h[1], #h
  h[1] = h[n]
  h[n] = nil
  n = n - 1
  local i = 1
  while true do
    local l, r, least = 2 * i, 2 * i + 1, i
    if l <= n and h[l][1] < h[least][1] then least = l end
    if r <= n and h[r][1] < h[least][1] then least = r end
    if least == i then break end
    h[i], h[least] = h[least], h[i]
    i = least
  end
  return top
end

-- The asked timelines of the slot with a head <= bound: a heap, and their
-- lane ids in a list (a bucket as a number). ZRANGE's score order is already a heap.
local function due_heads(heads, ranges, bound)
  local r = redis.call('ZRANGE', heads, '-inf', bound, 'BYSCORE', 'WITHSCORES')
  local heap, buckets = {}, {}
  for i = 1, #r, 2 do
    local bucket = tonumber(r[i]) or r[i]
    if is_asked(ranges, lane_bucket(r[i])) then
      heap[#heap + 1] = {tonumber(r[i + 1]), bucket}
      buckets[#buckets + 1] = bucket
    end
  end
  return heap, buckets
end

-- Merge the heap's timelines in score order from `low` ('-inf', or a decimal:
-- the heap's keys are then lower bounds) up to `bound`, one member at a time,
-- until `visit(bucket, id, score)` has counted `want`; it returns (stays,
-- counts): whether the member stays in range on its timeline (later reads skip
-- it by offset) and whether it counts towards `want`. `done(bucket)`, when
-- given, hears of each timeline read to the end of the range; `fetch(ids)`,
-- when given, hears of the ids of each chunk read, before they are visited (to
-- read their records in one call). Each timeline is
-- read in chunks, the first about its fair share and each next one twice the
-- last, so a merge of many interleaved timelines costs a ZRANGE per chunk, not
-- per member, and a timeline holding most of the due members a few.
local function walk(prefix, heap, low, bound, want, visit, done, fetch)
  local cursors, got = {}, 0
  local chunk = math.ceil(want / math.max(#heap, 1)) + 1
  while got < want and #heap > 0 do
    local bucket = heap_pop(heap)[2]
    local c = cursors[bucket]
    if not c then
      c = {tl = timeline(prefix, bucket), at = 1, kept = 0, reply = {}, size = chunk}
      cursors[bucket] = c
    end
    if c.at > #c.reply then
      -- Every member read before has stayed (counted in `kept`) or left.
      local count = math.min(c.size, want - got)
      c.size = c.size * 2
      c.reply = redis.call('ZRANGE', c.tl, low, bound, 'BYSCORE', 'LIMIT', c.kept, count,
                           'WITHSCORES')
      c.at, c.full = 1, #c.reply == 2 * count
      if fetch and #c.reply > 0 then
        local ids = {}
        for i = 1, #c.reply, 2 do ids[#ids + 1] = c.reply[i] end
        fetch(ids)
      end
    end
    if c.at <= #c.reply then
      local score = tonumber(c.reply[c.at + 1])
      if #heap > 0 and heap[1][1] < score then
        heap_push(heap, {score, bucket})  -- its key was a lower bound: not its turn yet
      else
        local stays, counts = visit(bucket, c.reply[c.at], score)
        if stays then c.kept = c.kept + 1 end
        if counts then got = got + 1 end
        c.at = c.at + 2
        if c.at <= #c.reply then
          heap_push(heap, {tonumber(c.reply[c.at + 1]), bucket})
        elseif c.full then
          heap_push(heap, {score, bucket})  -- more may follow: a lower bound, read on its turn
        elseif done then
          done(bucket)
        end
      end
    elseif done then
      done(bucket)
    end
  end
end
