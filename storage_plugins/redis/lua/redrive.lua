-- KEYS: alive, heads, dead, dead-ids[, waits] (helpers: optional).
-- ARGV: gen, prefix, at, 'all' | 'ids', ids...
-- Puts dead messages back on their timeline with no deliveries and no expiry.
-- Reply {OK, redriven}; an id that is not dead is skipped.
if not alive() then return {GONE} end
local prefix, at, waits = ARGV[2], ARGV[3], optional(5).waits
local ids = {}
if ARGV[4] == 'all' then
  ids = redis.call('ZRANGE', KEYS[3], 0, -1)
else
  for i = 5, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local redriven = 0
for _, id in ipairs(ids) do
  local rec = load(prefix, id)
  if rec and rec.dead then
    redis.call('HSET', prefix .. K_RECORD .. id,
               'dead', 0, 'n', 0, 'ex', 0, 'ts', at, 'v', rec.v + 1)
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZREM', KEYS[4], id)
    redis.call('ZADD', timeline(prefix, rec.b), at, id)
    redis.call('HINCRBY', prefix .. K_ENTERED, rec.b, 1)  -- a scan's kept order lacks it
    lowered(KEYS[2], rec.b, at)
    waiting(waits, rec.b, at)
    redriven = redriven + 1
  end
end
return {OK, redriven}
