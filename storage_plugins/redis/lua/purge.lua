-- KEYS: alive, dead, dead-ids. ARGV: gen, prefix, died before.
-- Deletes the dead messages that died before the given time. Reply {OK, purged}.
if not alive() then return {GONE} end
local prefix = ARGV[2]
local ids = redis.call('ZRANGE', KEYS[2], '-inf', '(' .. ARGV[3], 'BYSCORE')
bulk('HDEL', prefix .. K_RECORDS, ids)
bulk('HDEL', prefix .. K_PAYLOADS, ids)
bulk('HDEL', prefix .. K_HEADERS, ids)
bulk('ZREM', KEYS[2], ids)
bulk('ZREM', KEYS[3], ids)
return {OK, #ids}
