-- KEYS: alive, owned. ARGV: gen, prefix, owner, now.
-- Makes every message of the slot leased by `owner` due at `now`. Reply {OK, released}.
if not alive() then return {GONE} end
local prefix, owner, now = ARGV[2], ARGV[3], ARGV[4]
local released = 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local rec = load(prefix, id)
  if rec and rec.o == owner and not rec.dead then
    local key = prefix .. K_RECORD .. id
    redis.call('HSET', key, 'ts', now, 'v', rec.v + 1)
    redis.call('HDEL', key, 'o')
    redis.call('ZADD', timeline(prefix, rec.b), now, id)
    redis.call('ZREM', KEYS[2], id)
    released = released + 1
  end
end
return {OK, released}
