-- KEYS: alive, tombs. ARGV: gen, then ids.
-- Forgets the tombstones of the given ids. Reply {OK, forgotten}.
if not alive() then return {GONE} end
local forgotten = 0
for i = 2, #ARGV do forgotten = forgotten + redis.call('ZREM', KEYS[2], ARGV[i]) end
return {OK, forgotten}
