-- KEYS: alive, heads, grants[, waits] (helpers: optional). ARGV: gen, prefix, owner, now.
-- Makes every message of the slot leased by `owner` due at `now`: the ids of
-- the owner's grants whose records still name the owner. Reply {OK, released}.
if not alive() then return {GONE} end
local prefix, owner, now = ARGV[2], ARGV[3], ARGV[4]
local released, changed, waits, ended = 0, {}, optional(4).waits, {}
local mine = {}
for _, g in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if string.match(g, '^%-?%d+:(.*)$') == owner then mine[#mine + 1] = g end
end
local changes, ids = {ids = {}, recs = {}}, granted_ids(prefix, mine)
local recs = load_all(prefix, ids, {})
for _, id in ipairs(ids) do
  local rec = recs[id]
  if rec and rec.o == owner and not rec.dead then
    unlease(ended, rec.ts, owner)
    reschedule(prefix, KEYS[2], waits, id, rec, now, changed, changes)
    rec.o = nil
    released = released + 1
  end
end
flush(prefix, changes)
settle_grants(prefix, KEYS[3], ended)
fix_heads(prefix, KEYS[2], changed)
return {OK, released}
