-- KEYS: alive, timeline, stray-homes. ARGV: gen, max score, sample, with homes ('1' / '0').
-- Reply {OK, count of scores <= max, 'home,...', 'score,...' (the first `sample`)}.
if not alive() then return {GONE} end
local homes = {}
if ARGV[4] == '1' then homes = redis.call('SMEMBERS', KEYS[3]) end
local scores = {}
local r = redis.call('ZRANGE', KEYS[2], '-inf', ARGV[2], 'BYSCORE',
                     'LIMIT', 0, ARGV[3], 'WITHSCORES')
for i = 2, #r, 2 do scores[#scores + 1] = int(tonumber(r[i])) end
local due = redis.call('ZCOUNT', KEYS[2], '-inf', ARGV[2])
return {OK, due, table.concat(homes, ','), table.concat(scores, ',')}
