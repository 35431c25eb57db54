-- KEYS: alive, dead-ids. ARGV: gen, min ('-' or '(' .. after_id), limit.
-- Reply {OK, ids...}: the slot's dead ids after `min`, in byte order.
if not alive() then return {GONE} end
local out = redis.call('ZRANGE', KEYS[2], ARGV[2], '+', 'BYLEX', 'LIMIT', 0, ARGV[3])
table.insert(out, 1, OK)
return out
