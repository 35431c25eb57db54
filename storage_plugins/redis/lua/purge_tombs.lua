-- KEYS: alive, tombs. ARGV: gen, deleted before, limit, keep (0: no count bound).
-- Forgets, the oldest first and up to `limit` in all, the tombstones of ids
-- deleted before the given time and those beyond the newest `keep`: both
-- rules take from the old end, so it is one trim by rank. Reply {OK,
-- forgotten, of which still inside the window (forgotten for the bound)}.
if not alive() then return {GONE} end
local tombs, limit, keep = KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local aged = redis.call('ZCOUNT', tombs, '-inf', '(' .. ARGV[2])
local excess = keep > 0 and redis.call('ZCARD', tombs) - keep or 0
local n = math.min(limit, math.max(aged, excess))
if n > 0 then redis.call('ZREMRANGEBYRANK', tombs, 0, n - 1) end
return {OK, n, math.max(0, n - aged)}
