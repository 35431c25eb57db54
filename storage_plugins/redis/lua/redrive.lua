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
local recs, changes = load_all(prefix, ids, {}), {ids = {}, recs = {}}
for _, id in ipairs(ids) do
  local rec = recs[id]
  if rec and rec.dead then
    rec.dead, rec.n, rec.ex, rec.ts, rec.v = false, 0, 0, tonumber(at), rec.v + 1
    dirty(changes, id, rec)
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZREM', KEYS[4], id)
    local lane = lane_of(rec)
    redis.call('ZADD', timeline(prefix, lane), at, id)
    redis.call('HINCRBY', prefix .. K_ENTERED, rec.b, 1)  -- a scan's kept order lacks it
    lowered(KEYS[2], lane, at)
    waiting(waits, rec.b, at)
    redriven = redriven + 1
  end
end
flush(prefix, changes)
return {OK, redriven}
