-- KEYS: alive, tombs (formats 1 to 3: a sorted set, id scored by the time of
-- deletion), graves. ARGV: gen, prefix, chunk.
-- Moves up to `chunk` of the slot's oldest tombstones from `tombs` to their
-- fields of `records` and the end of `graves` (keys.GRAVES), in time order,
-- and removes them from `tombs`; an id holding a record (never both in
-- formats 1 to 3) keeps it. A run cut short is carried on by the next.
-- Reply {OK, moved, left in tombs}.
if not alive() then return {GONE} end
local prefix = ARGV[2]
local found = redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[3]) - 1, 'WITHSCORES')
local ids = {}
for i = 1, #found, 2 do ids[#ids + 1] = found[i] end
local fields = collect('HMGET', prefix .. K_RECORDS, ids)
local buried = {}
for i, id in ipairs(ids) do
  if not fields[i] then push(buried, found[2 * i], id) end
end
bury(prefix, KEYS[3], buried)
bulk('ZREM', KEYS[2], ids)
return {OK, #buried / 2, redis.call('ZCARD', KEYS[2])}
