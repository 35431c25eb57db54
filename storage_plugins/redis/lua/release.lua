-- KEYS: alive, heads, owned[, waits] (helpers: optional). ARGV: gen, prefix, owner, now.
-- Makes every message of the slot leased by `owner` due at `now`. Reply {OK, released}.
if not alive() then return {GONE} end
local prefix, owner, now = ARGV[2], ARGV[3], ARGV[4]
local released, changed, waits = 0, {}, optional(4).waits
local changes, ids = {ids = {}, recs = {}}, redis.call('ZRANGE', KEYS[3], 0, -1)
local recs = load_all(prefix, ids, {})
for _, id in ipairs(ids) do
  local rec = recs[id]
  if rec and rec.o == owner and not rec.dead then
    reschedule(prefix, KEYS[2], waits, id, rec, now, changed, changes)
    rec.o = nil
    redis.call('ZREM', KEYS[3], id)
    released = released + 1
  end
end
flush(prefix, changes)
fix_heads(prefix, KEYS[2], changed)
return {OK, released}
