-- KEYS: alive, heads, stray-homes. ARGV: gen, asked buckets ('*' or 'lo-hi,...').
-- Reply {OK, 'home,...', earliest}: the stray homes of the slot's buckets, and
-- the earliest head among the asked timelines of the slot ('' when none).
if not alive() then return {GONE} end
local ranges = asked(ARGV[2])
local homes = table.concat(redis.call('SMEMBERS', KEYS[3]), ',')
local rank, chunk = 0, ranges and 64 or 1
while true do
  local r = redis.call('ZRANGE', KEYS[2], rank, rank + chunk - 1, 'WITHSCORES')
  if #r == 0 then return {OK, homes, ''} end
  for i = 1, #r, 2 do
    if is_asked(ranges, lane_bucket(r[i])) then return {OK, homes, int(tonumber(r[i + 1]))} end
  end
  rank = rank + chunk
end
