-- KEYS: alive, dead, dead-ids. ARGV: gen, prefix, died before.
-- Deletes the dead messages that died before the given time. Reply {OK, purged}.
if not alive() then return {GONE} end
local prefix = ARGV[2]
local ids = redis.call('ZRANGE', KEYS[2], '-inf', '(' .. ARGV[3], 'BYSCORE')
for _, id in ipairs(ids) do
  redis.call('UNLINK', prefix .. K_RECORD .. id, prefix .. K_PAYLOAD .. id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
end
return {OK, #ids}
