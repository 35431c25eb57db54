-- KEYS: alive, heads, then waits on a priority topic. ARGV: gen, prefix, now.
-- Reply {OK, oldest, priority, due} for the census: the slot's earliest score
-- ('' when it holds no live message); when that is a rank, the priority of a
-- message there (the head of the slot's timelines; else 0) and the earliest
-- score from 0 to now ('' when none). That one is found by walking the
-- timelines `waits` (lower bounds, see helpers: waiting) puts at or before
-- now, while a bound may beat the best score read: promote keeps those bounds
-- exact, so this reads a timeline or two, and no record but the head's.
if not alive() then return {GONE} end
local prefix, waits = ARGV[2], optional(3).waits
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if not first[1] then return {OK, '', 0, ''} end
local oldest = tonumber(first[2])
if oldest >= 0 or not waits then return {OK, int(oldest), 0, ''} end
local id = redis.call('ZRANGE', timeline(prefix, first[1]), 0, 0)[1]
local rec = load(prefix, id)
local priority = rec and rec.p or 0
local due
local bounds = redis.call('ZRANGE', waits, '0', ARGV[3], 'BYSCORE', 'WITHSCORES')
for i = 1, #bounds, 2 do
  if due and tonumber(bounds[i + 1]) >= due then break end
  local f = redis.call('ZRANGE', timeline(prefix, bounds[i]), '0', ARGV[3], 'BYSCORE',
                       'LIMIT', 0, 1, 'WITHSCORES')
  if f[1] and (not due or tonumber(f[2]) < due) then due = tonumber(f[2]) end
end
return {OK, int(oldest), priority, due and int(due) or ''}
