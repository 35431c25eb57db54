-- KEYS: alive, heads, owned[, waits] (helpers: optional). ARGV: gen, prefix, owner, now.
-- Makes every message of the slot leased by `owner` due at `now`. Reply {OK, released}.
if not alive() then return {GONE} end
local prefix, owner, now = ARGV[2], ARGV[3], ARGV[4]
local released, changed, waits = 0, {}, optional(4).waits
for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  local rec = load(prefix, id)
  if rec and rec.o == owner and not rec.dead then
    reschedule(prefix, KEYS[2], waits, id, rec, now, changed)
    redis.call('HDEL', prefix .. K_RECORD .. id, 'o')
    redis.call('ZREM', KEYS[3], id)
    released = released + 1
  end
end
fix_heads(prefix, KEYS[2], changed)
return {OK, released}
