-- KEYS: alive, heads, grants, dead, dead-ids[, waits][, graves: an ack leaves
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
-- found again, one changed earlier is seen changed (a batch is of one mode).
local acked, removed, disowned, apart, headed = {}, {}, {}, {}, {}
-- Leases ended (helpers: unlease), acks' by expiry first (one name a grant,
-- not a string a message), and the ids extended, into one new grant.
local ended, expiries, extended = {}, {}, {}

-- An ack reads its records packed, with no table a record: a record held by
-- `owner` at `version` (check_holder's OK: alive, same owner, same version)
-- is acked from its fields; any other is decoded for check_holder's refusal.
local function ack(id, packed, version)
  if not stored(packed) then packed = nil end
  if packed and not acked[id] then
    local ts, v, _, b, _, _, flags, _, olen, at = struct.unpack(K_RECORD, packed)
    if flags % 2 == 0 and v == version and olen > 0 and olen == #owner
       and string.sub(packed, at, at + olen - 1) == owner then
      acked[id] = true
      local lane = b
      if has(flags, 8) then  -- on its key's lane (helpers: lane_of)
        local from = at + olen
        local klen = struct.unpack('<H', packed, from)
        lane = int(b) .. ':' .. string.sub(packed, from + 2, from + 1 + klen)
      end
      local members = removed[lane]
      if not members then
        members = {}
        removed[lane] = members
      end
      members[#members + 1] = id
      disowned[#disowned + 1] = id
      if has(flags, 2) then apart[#apart + 1] = id end
      if has(flags, 16) then headed[#headed + 1] = id end
      left(changed, lane, ts)
      expiries[ts] = (expiries[ts] or 0) + 1
      local k = #buried  -- in place: push's call costs a message more
      buried[k + 1], buried[k + 2] = time, id
      k = #numbers  -- three values: push would make a table of them
      numbers[k + 1], numbers[k + 2], numbers[k + 3] = '0', '0', int(ts)
      return
    end
  end
  local rec = packed and not acked[id] and decode(packed) or nil
  refusal(numbers, owners, check_holder(rec, owner, version), rec)
end

local changes = {ids = {}, recs = {}}
if mode == 'ack' then
  local packed = collect('HMGET', prefix .. K_RECORDS, ids)
  for i = 1, #ids do ack(ids[i], packed[i], tonumber(versions[i])) end
else
  local recs = load_all(prefix, ids, {})
  for i = 1, #ids do
    local id = ids[i]
    local rec = recs[id]
    local code = check_holder(rec, owner, tonumber(versions[i]))
    if code ~= OK then
      refusal(numbers, owners, code, rec)
    elseif mode == 'back' then
      local due = dues[i]
      unlease(ended, rec.ts, owner)
      reschedule(prefix, KEYS[2], extra.waits, id, rec, due, changed, changes)
      rec.n, rec.o = rec.n - 1, nil
      push(numbers, '0', int(rec.v), due)
    elseif mode == 'nack' and dies_on_nack(rec.n, effective_max_deliveries(rec.md, topic_max)) then
      kill(prefix, id, rec, time, ended, KEYS[4], KEYS[5], changed, changes)
      push(numbers, '0', '0', time)
    else
      unlease(ended, rec.ts, owner)
      reschedule(prefix, KEYS[2], extra.waits, id, rec, time, changed, changes)
      if mode == 'extend' then
        extended[#extended + 1] = id
      else
        rec.o = nil
      end
      push(numbers, '0', int(rec.v), time)
    end
  end
end
flush(prefix, changes)
if not extra.graves then bulk('HDEL', prefix .. K_RECORDS, disowned) end  -- else buried
bulk('HDEL', prefix .. K_PAYLOADS, apart)
bulk('HDEL', prefix .. K_HEADERS, headed)
for bucket, members in pairs(removed) do bulk('ZREM', timeline(prefix, bucket), members) end
for ts, count in pairs(expiries) do
  local g = int(ts) .. ':' .. owner
  ended[g] = (ended[g] or 0) + count
end
settle_grants(prefix, KEYS[3], ended)
grant(prefix, KEYS[3], time, owner, extended)
fix_heads(prefix, KEYS[2], changed)
bury(prefix, extra.graves, buried)
return {OK, table.concat(numbers, ','), owners}
