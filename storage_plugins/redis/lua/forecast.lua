-- KEYS: alive, heads, grants. ARGV: gen, prefix, now, step, bins.
-- Reply {OK, count of bin 0, ..., count of bin bins - 1}: the slot's waiting
-- messages due in [now + i * step, now + (i + 1) * step), as ZCOUNTs on each
-- timeline of the slot (the members of `heads`) less those leased (they sit
-- on their timeline at their lease expiry: the counts of the grants, keys.GRANTS,
-- in each bin). A timeline with nothing in the whole range costs one ZCOUNT;
-- no record is read.
if not alive() then return {GONE} end
local prefix, now, step, bins = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local stop = '(' .. int(now + step * bins)
local counts = {}
for i = 1, bins do counts[i] = 0 end
local function add(key)
  if redis.call('ZCOUNT', key, int(now), stop) == 0 then return end
  for i = 1, bins do
    local lo = now + step * (i - 1)
    counts[i] = counts[i] + redis.call('ZCOUNT', key, int(lo), '(' .. int(lo + step))
  end
end
for _, bucket in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  add(timeline(prefix, bucket))
end
local held = redis.call('ZRANGE', KEYS[3], int(now), stop, 'BYSCORE', 'WITHSCORES')
local names = {}
for i = 1, #held, 2 do names[#names + 1] = held[i] end
local granted = collect('HMGET', prefix .. K_GRANTED, names)
for i = 1, #names do
  local bin = math.floor((tonumber(held[2 * i]) - now) / step) + 1
  counts[bin] = counts[bin] - (tonumber(granted[i]) or 0)
end
local reply = {OK}
for i = 1, bins do reply[i + 1] = counts[i] end
return reply
