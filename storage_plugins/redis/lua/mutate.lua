-- KEYS: alive, heads, grants[, waits][, graves: a cancel leaves a tombstone]
-- (helpers: optional). ARGV: gen, prefix,
-- mode ('move' | 'rewrite' | 'cancel'), id, version, at, now, payload ('rewrite':
-- a move that also replaces the payload), priority (a move's new one; '' keeps it).
-- Reply {OK, 'code,version,timestamp', owners} as SETTLE's, for one item.
if not alive() then return {GONE} end
local prefix, mode, id, at = ARGV[2], ARGV[3], ARGV[4], ARGV[6]
local rec = load(prefix, id)
local numbers, owners, changed, buried = {}, {}, {}, {}
local changes, ended = {ids = {}, recs = {}}, {}  -- ended: helpers' unlease
local extra = optional(4)
local code = check_movable(rec, tonumber(ARGV[5]), tonumber(ARGV[7]))
if code ~= OK then
  refusal(numbers, owners, code, rec)
elseif mode == 'cancel' then
  drop(prefix, id, rec, ended, changed)
  push(buried, ARGV[7], id)
  push(numbers, '0', '0', int(rec.ts))
else
  if rec.o then unlease(ended, rec.ts, rec.o) end
  reschedule(prefix, KEYS[2], extra.waits, id, rec, at, changed, changes)
  rec.o = nil
  if ARGV[9] ~= '' then rec.p = tonumber(ARGV[9]) end
  if mode == 'rewrite' then set_payload(prefix, id, rec, ARGV[8]) end
  push(numbers, '0', int(rec.v), at)
end
flush(prefix, changes)
settle_grants(prefix, KEYS[3], ended)
fix_heads(prefix, KEYS[2], changed)
bury(prefix, extra.graves, buried)
return {OK, table.concat(numbers, ','), owners}
