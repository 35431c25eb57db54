-- KEYS: alive, heads, grants[, waits] (helpers: optional). ARGV: gen, prefix, owner, now.
-- Makes every message of the slot leased by `owner` due at `now`: the ids of
-- the owner's grants whose records still name the owner. Reply {OK, released}.
if not alive() then return {GONE} end
local prefix, owner, now = ARGV[2], ARGV[3], ARGV[4]
local released, changed, waits, ended = 0, {}, optional(4).waits, {}
local changes, ids, seen = {ids = {}, recs = {}}, {}, {}
for _, g in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if string.match(g, '^%-?%d+:(.*)$') == owner then
    for _, id in ipairs(redis.call('LRANGE', prefix .. K_GRANT .. g, 0, -1)) do
      if not seen[id] then
        seen[id] = true
        ids[#ids + 1] = id
      end
    end
  end
end
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
