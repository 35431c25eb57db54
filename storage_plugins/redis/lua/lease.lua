-- KEYS: alive, heads, grants, dead, dead-ids, stray-homes[, waits][, graves: an
-- at-most-once delivery leaves a tombstone] (helpers: optional).
-- ARGV: gen, prefix, now, quota, bound, lease until, owner, max deliveries (the
-- topic's), solo ('1': refuse with STRAYS when strays of the slot's buckets live
-- in other slots), asked buckets ('*' or 'lo-hi,...'), then the caps as columns
-- (columns.py: keys, their lengths, the most of each to take), then shares ('1':
-- one of several slots' shares of a pass: refuse with KEYED, changing nothing,
-- when keyed messages are due, since the pass must then share among keys
-- across the slots, leasing.py).
-- Takes the slot's messages of the asked buckets with timestamp <= bound (the
-- pass's bound, or less when merging slots) until `quota` are delivered; dead
-- letters do not count against the quota. The quota is shared max-min fairly
-- among the keys with messages due (base.py: fair lease passes; the unkeyed
-- messages as key ''), each key's messages earliest first across its lanes
-- (walking `heads`); one key alone (every pass of a topic without keys, and
-- of a priority topic) takes them earliest first across its timelines.
-- Reply {OK, dead lettered, numbers, blob}: per delivery its numbers (bucket,
-- due timestamp, version, deliveries, priority, id length, payload length, key
-- length, headers length) as little-endian doubles (K_NUMBERS; formatting them
-- as text cost more than the rest of a delivery), and the id, the payload, the
-- key and the headers in the blob.
if not alive() then return {GONE} end
if ARGV[9] == '1' and redis.call('SCARD', KEYS[6]) > 0 then return {STRAYS} end
local prefix, now_s, quota, bound = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local lease_until, owner, topic_max = ARGV[6], ARGV[7], tonumber(ARGV[8])
local extra = optional(7)
local now, until_n = tonumber(now_s), tonumber(lease_until)
local numbers, blob, leased, granted, changed, buried = {}, {}, {}, {}, {}, {}
-- Leases this pass ends (helpers: unlease): lapsed ones delivered again.
local ended = {}
-- Records as stored (packed: unpacked where visited, with no table on the
-- common path), and the records rewritten, (id, record) pairs for one HSET.
local recs, written, changes = {}, {}, {ids = {}, recs = {}}
-- Per delivery its id and payload (false for one kept apart, until one HMGET
-- after the walk reads them), and the ids whose payloads to read; per keyed
-- delivery its key, per one with headers its place among those read after
-- (or, delivered at most once, its headers read before they were deleted).
local sent, payloads, unread, keyed, headed, hunread, hgone = {}, {}, {}, {}, {}, {}, {}
local dead = 0

local function fetch(ids)
  local packed = collect('HMGET', prefix .. K_RECORDS, ids)
  for i = 1, #ids do recs[ids[i]] = packed[i] end
end

local function visit(lane, id)
  local packed = recs[id]
  if not stored(packed) then
    redis.call('ZREM', timeline(prefix, lane), id)  -- an index entry without a record
    left(changed, lane, 0)
    return false, false
  end
  local ts, v, n, b, md, ex, flags, p, olen, at = struct.unpack(K_RECORD, packed)
  left(changed, lane, ts)
  local fate = 'keep'  -- no limit and no expiry (the common case): no rule to ask
  if md ~= 0 or topic_max ~= 0 or ex ~= 0 then
    fate = lease_fate(n, md, topic_max, ex, math.max(now, ts))  -- at delivery
  end
  if fate == 'kill' then
    kill(prefix, id, decode(packed), now_s, ended, KEYS[4], KEYS[5], changed, changes)
    dead = dead + 1
    return false, false
  end
  v, n = v + 1, n + 1
  if olen > 0 and fate == 'keep' then  -- a lapsed lease: it leaves its grant
    unlease(ended, ts, string.sub(packed, at, at + olen - 1))
  end
  sent[#sent + 1] = id
  local i = #sent
  local from, key, hlen = at + olen, '', 0
  if flags >= 4 then  -- a key or headers (record.py)
    if has(flags, 4) then
      local klen = struct.unpack('<H', packed, from)
      key = string.sub(packed, from + 2, from + 1 + klen)
      keyed[i] = key
      from = from + 2 + klen
    end
    if has(flags, 16) then
      hlen = false
      hunread[#hunread + 1] = id
      headed[i] = #hunread
    end
  end
  if fate == 'drop' then
    local rec = decode(packed)
    local payload = payload_of(prefix, id, rec)  -- drop deletes it
    payloads[i] = payload
    if hlen == false then  -- drop deletes them too: read them first
      headed[i] = nil
      hunread[#hunread] = nil
      hgone[i] = redis.call('HGET', prefix .. K_HEADERS, id) or ''
      hlen = #hgone[i]
    end
    numbers[i] = struct.pack(K_NUMBERS, b, ts, v, n, p, #id, #payload, #key, hlen)
    drop(prefix, id, rec, ended, changed)  -- at-most-once: gone once delivered
    push(buried, now_s, id)
    return false, true
  end
  local body = string.sub(packed, from)
  local apart = flags % 4 >= 2
  if apart or hlen == false then  -- apart, or headers: read after the walk
    numbers[i] = {b, ts, v, n, p, #id, #body, #key}
    if apart then
      payloads[i] = false
      unread[#unread + 1] = id
    else
      payloads[i] = body
    end
  else
    payloads[i] = body
    numbers[i] = struct.pack(K_NUMBERS, b, ts, v, n, p, #id, #body, #key, 0)
  end
  local rest = from == at + olen and body or string.sub(packed, at + olen)  -- key, payload
  -- Pairs appended in place, here and below: push's call costs a message more.
  local w = #written
  written[w + 1] = id
  written[w + 2] = struct.pack(K_RECORD, until_n, v, n, b, md, ex, flags, p, #owner) .. owner
                   .. rest
  -- Moved to the lease expiry at the end (one ZADD per timeline); until then
  -- it stays in range, skipped by the walk's offset.
  local entries = leased[lane]
  if not entries then
    entries = {}
    leased[lane] = entries
  end
  w = #entries
  entries[w + 1], entries[w + 2] = lease_until, id
  granted[#granted + 1] = id
  return true, true
end

-- Lanes whose every due member a pass took (all_of): their heads are set
-- from their first members at the end, in one ZADD (fix_heads would check each).
local whole = {}

-- Take everything due on `lanes` when it fits in `want` (the steady case):
-- each due timeline is read once, their records in one HMGET, and the members
-- visited in lane order, since the pass takes them all and the merge in time
-- order (walk) would only cost a heap step a message. False when it does not
-- fit: the reads stopped one past `want`, nothing was written.
local function all_of(lanes, want)
  local due, room, ids = {}, want + 1, {}
  for i = 1, #lanes do
    local r = redis.call('ZRANGE', timeline(prefix, lanes[i]), '-inf', bound, 'BYSCORE',
                         'LIMIT', 0, room)
    due[i] = r
    room = room - #r
    if room <= 0 then return false end
    for j = 1, #r do ids[#ids + 1] = r[j] end
  end
  if #ids > 0 then fetch(ids) end
  for i = 1, #lanes do
    local r = due[i]
    for j = 1, #r do visit(lanes[i], r[j]) end
    if #r > 0 then whole[#whole + 1] = lanes[i] end
  end
  return true
end

-- Take up to `want` of the timelines in `heap` (their lane ids in `lanes`),
-- earliest first.
local function take(heap, lanes, want)
  if not all_of(lanes, want) then walk(prefix, heap, '-inf', bound, want, visit, nil, fetch) end
end

local heap, lanes = due_heads(KEYS[2], asked(ARGV[10]), bound)
-- The due lanes by key, in order of their heads (the heap is in score order).
local groups, order = {}, {}
for _, item in ipairs(heap) do
  local lane = item[2]
  local key = type(lane) == 'number' and '' or string.match(lane, '^%d+:(.*)$')
  local g = groups[key]
  if not g then
    g = {key = key, first = item[1], heap = {}, lanes = {}, share = 0}
    groups[key] = g
    order[#order + 1] = g
  end
  g.heap[#g.heap + 1] = item
  g.lanes[#g.lanes + 1] = lane
end
if ARGV[14] == '1' and (#order > 1 or (order[1] and order[1].key ~= '')) then
  return {KEYED}
end
local caps = {}
if not extra.waits then  -- a priority topic takes by rank: no caps
  local names, most = cut(ARGV[11] or '', ARGV[12] or ''), decimals(ARGV[13] or '')
  for i = 1, #names do caps[names[i]] = tonumber(most[i]) end
end
if #order == 1 or extra.waits then
  local want = quota
  if #order == 1 and caps[order[1].key] then want = math.min(want, caps[order[1].key]) end
  if want > 0 then take(heap, lanes, want) end
elseif #order > 1 and (next(caps) or not all_of(lanes, quota)) then
  -- (Everything due fitting the quota, all_of took it: every key had its share.)
  -- Max-min fair shares: how many each key has due (a ZCOUNT a lane, capped),
  -- then rounds of equal shares of what is left among the keys not yet
  -- served in full; fewer left than keys: the earliest keys one more each.
  local active = {}
  for _, g in ipairs(order) do
    local due = 0
    for _, lane in ipairs(g.lanes) do
      due = due + redis.call('ZCOUNT', timeline(prefix, lane), '-inf', bound)
    end
    g.due = caps[g.key] and math.min(due, caps[g.key]) or due
    if g.due > 0 then active[#active + 1] = g end
  end
  local rest = quota
  while rest > 0 and #active > 0 do
    if rest < #active then
      for i = 1, rest do active[i].share = active[i].share + 1 end
      rest = 0
    else
      local each, still = math.floor(rest / #active), {}
      for _, g in ipairs(active) do
        local more = math.min(each, g.due - g.share)
        g.share, rest = g.share + more, rest - more
        if g.share < g.due then still[#still + 1] = g end
      end
      active = still
    end
  end
  for _, g in ipairs(order) do
    if g.share > 0 then take(g.heap, g.lanes, g.share) end
  end
end
for lane, entries in pairs(leased) do
  bulk('ZADD', timeline(prefix, lane), entries)
  waiting(extra.waits, lane, lease_until)
end
settle_grants(prefix, KEYS[3], ended)
grant(prefix, KEYS[3], lease_until, owner, granted)  -- one grant a pass, not a member a message
bulk('HSET', prefix .. K_RECORDS, written)
flush(prefix, changes)
local read, next_read = collect('HMGET', prefix .. K_PAYLOADS, unread), 1
local heads_read = collect('HMGET', prefix .. K_HEADERS, hunread)
for i, id in ipairs(sent) do
  local payload, k = payloads[i], numbers[i]
  if payload == false then
    payload = read[next_read] or ''
    next_read = next_read + 1
  end
  local headers = hgone[i] or (headed[i] and (heads_read[headed[i]] or '')) or ''
  if type(k) == 'table' then
    numbers[i] = struct.pack(K_NUMBERS, k[1], k[2], k[3], k[4], k[5], k[6], #payload, k[8],
                             #headers)
  end
  local at = #blob
  blob[at + 1], blob[at + 2] = id, payload
  if keyed[i] then blob[#blob + 1] = keyed[i] end
  if #headers > 0 then blob[#blob + 1] = headers end
end
-- A lane taken whole now starts at its first waiting member or at the lease
-- expiry, whichever is first: read after the moves above.
local firsts, emptied = {}, {}
for _, lane in ipairs(whole) do
  changed[lane] = nil
  local first = redis.call('ZRANGE', timeline(prefix, lane), 0, 0, 'WITHSCORES')
  if first[1] then
    push(firsts, first[2], lane)
  else
    emptied[#emptied + 1] = lane
  end
end
bulk('ZADD', KEYS[2], firsts)
bulk('ZREM', KEYS[2], emptied)
fix_heads(prefix, KEYS[2], changed)
bury(prefix, extra.graves, buried)
return {OK, dead, table.concat(numbers), table.concat(blob)}
