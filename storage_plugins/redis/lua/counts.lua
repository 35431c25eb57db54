-- KEYS: alive, heads, grants, dead. ARGV: gen, prefix, now.
-- Reply {OK, live, due, leased, dead}: a few ZCARD / ZCOUNT per timeline of the
-- slot (the members of `heads`) and the counts of the grants after now; no
-- record is read.
if not alive() then return {GONE} end
local prefix, now = ARGV[2], ARGV[3]
local live, due = 0, 0
for _, bucket in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local tl = timeline(prefix, bucket)
  live = live + redis.call('ZCARD', tl)
  due = due + redis.call('ZCOUNT', tl, '-inf', now)
end
local leased = 0
local live_grants = redis.call('ZRANGE', KEYS[3], '(' .. now, '+inf', 'BYSCORE')
for _, count in ipairs(collect('HMGET', prefix .. K_GRANTED, live_grants)) do
  leased = leased + (tonumber(count) or 0)
end
return {OK, live, due, leased, redis.call('ZCARD', KEYS[4])}
