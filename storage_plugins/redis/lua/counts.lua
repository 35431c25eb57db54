-- KEYS: alive, owned, dead, stray-timelines. ARGV: gen, prefix, home, now.
-- Reply {OK, live, due, leased, dead}: a few ZCARD / ZCOUNT, no record is read.
if not alive() then return {GONE} end
local prefix, now = ARGV[2], ARGV[4]
local buckets = redis.call('SMEMBERS', KEYS[4])
buckets[#buckets + 1] = ARGV[3]
local live, due = 0, 0
for _, bucket in ipairs(buckets) do
  local tl = timeline(prefix, bucket)
  live = live + redis.call('ZCARD', tl)
  due = due + redis.call('ZCOUNT', tl, '-inf', now)
end
local leased = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
return {OK, live, due, leased, redis.call('ZCARD', KEYS[3])}
