-- KEYS: alive, tombs. ARGV: gen, deleted before, limit.
-- Forgets up to `limit` tombstones of ids deleted before the given time, the
-- oldest first. Reply {OK, forgotten}.
if not alive() then return {GONE} end
local ids = redis.call('ZRANGE', KEYS[2], '-inf', '(' .. ARGV[2], 'BYSCORE',
                       'LIMIT', 0, tonumber(ARGV[3]))
bulk('ZREM', KEYS[2], ids)
return {OK, #ids}
