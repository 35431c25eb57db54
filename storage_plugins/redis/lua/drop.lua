-- KEYS: alive, heads, grants, dead, dead-ids, stray-homes, graves, waits. ARGV: gen, prefix.
-- Deletes every key of the slot, `alive` included. Idempotent: a slot already
-- dropped (or of another incarnation of the name) is left alone. Reply {OK, messages}.
if not alive() then return {OK, 0} end
local prefix = ARGV[2]
local sets = {KEYS[4]}
for _, bucket in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  sets[#sets + 1] = timeline(prefix, bucket)
end
local dropped = 0
for _, set in ipairs(sets) do
  dropped = dropped + redis.call('ZCARD', set)
  redis.call('UNLINK', set)
end
for _, g in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  redis.call('UNLINK', prefix .. K_GRANT .. g)
end
redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
redis.call('UNLINK', prefix .. K_ENTERED, prefix .. K_RECORDS, prefix .. K_PAYLOADS,
             prefix .. K_HEADERS, prefix .. K_GRANTED)
return {OK, dropped}
