-- KEYS: alive, heads, owned, dead, dead-ids[, waits][, tombs: an ack leaves
-- tombstones] (helpers: optional).
-- ARGV: gen, prefix, mode ('ack' | 'extend' | 'nack' | 'back'), owner, time
-- (extend: until, nack: at), max deliveries (the topic's), then the items as
-- columns (columns.py): ids, their lengths, versions, and for 'back' (hand back
-- a lease never sent) the due timestamps.
-- Reply {OK, numbers, owners}: per item its code, version and timestamp; per
-- refused item (code > 0; it changed nothing) the owner ('' for none) in owners.
if not alive() then return {GONE} end
local prefix, mode, owner, time, topic_max = ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local numbers, owners, changed, buried = {}, {}, {}, {}
local extra = optional(6)
local ids, versions = cut(ARGV[7], ARGV[8]), decimals(ARGV[9])
local dues = mode == 'back' and decimals(ARGV[10]) or {}
-- The records are read in one call first, and those changed written in one at
-- the end (helpers: dirty); acks delete in a few calls after the loop (their
-- fields, per timeline, from owned); an id acked earlier in the batch is not
-- found again, one changed earlier is seen changed.
local recs, changes = load_all(prefix, ids, {}), {ids = {}, recs = {}}
local acked, removed, disowned, apart, headed = {}, {}, {}, {}, {}
for i = 1, #ids do
  local id = ids[i]
  local rec = not acked[id] and recs[id] or nil
  local code = check_holder(rec, owner, tonumber(versions[i]))
  if code ~= OK then
    refusal(numbers, owners, code, rec)
  elseif mode == 'ack' then
    acked[id] = true
    local lane = lane_of(rec)
    local members = removed[lane]
    if not members then
      members = {}
      removed[lane] = members
    end
    members[#members + 1] = id
    disowned[#disowned + 1] = id
    if rec.apart then apart[#apart + 1] = id end
    if rec.headed then headed[#headed + 1] = id end
    left(changed, lane, rec.ts)
    push(buried, time, id)
    push(numbers, '0', '0', int(rec.ts))
  elseif mode == 'back' then
    local due = dues[i]
    reschedule(prefix, KEYS[2], extra.waits, id, rec, due, changed, changes)
    rec.n, rec.o = rec.n - 1, nil
    redis.call('ZREM', KEYS[3], id)
    push(numbers, '0', int(rec.v), due)
  elseif mode == 'nack' and dies_on_nack(rec.n, effective_max_deliveries(rec.md, topic_max)) then
    kill(prefix, id, rec, time, KEYS[3], KEYS[4], KEYS[5], changed, changes)
    push(numbers, '0', '0', time)
  else
    reschedule(prefix, KEYS[2], extra.waits, id, rec, time, changed, changes)
    if mode == 'extend' then
      redis.call('ZADD', KEYS[3], time, id)
    else
      rec.o = nil
      redis.call('ZREM', KEYS[3], id)
    end
    push(numbers, '0', int(rec.v), time)
  end
end
flush(prefix, changes)
bulk('HDEL', prefix .. K_RECORDS, disowned)
bulk('HDEL', prefix .. K_PAYLOADS, apart)
bulk('HDEL', prefix .. K_HEADERS, headed)
for bucket, members in pairs(removed) do bulk('ZREM', timeline(prefix, bucket), members) end
bulk('ZREM', KEYS[3], disowned)
fix_heads(prefix, KEYS[2], changed)
bury(extra.tombs, buried)
return {OK, table.concat(numbers, ','), owners}
