-- KEYS: alive, an index of the slot's timelines (bucket -> a lower bound of
-- its first score in range: `heads` for a lease, `waits` for a promote),
-- stray-homes. ARGV: gen, prefix, max score, sample, with homes ('1' / '0'),
-- asked buckets ('*' or 'lo-hi,...'), min score ('-inf' for a lease; '0' for
-- a promote, which takes no rank).
-- Reply {OK, count of scores in [min, max], 'home,...', 'score,...', keyed}: over
-- the asked timelines of the slot, how many are in range and the first `sample`
-- of their scores in order (merged along the index, as the pass would take
-- them); keyed 1 when one of them is a key's lane (the pass must share among
-- keys: leasing.py), else 0.
if not alive() then return {GONE} end
local homes = {}
if ARGV[5] == '1' then homes = redis.call('SMEMBERS', KEYS[3]) end
local prefix, bound, low = ARGV[2], ARGV[3], ARGV[7]
local heap, buckets = due_heads(KEYS[2], asked(ARGV[6]), bound)
local due, keyed = 0, 0
for _, bucket in ipairs(buckets) do
  due = due + redis.call('ZCOUNT', timeline(prefix, bucket), low, bound)
  if type(bucket) ~= 'number' then keyed = 1 end
end
local scores = {}
walk(prefix, heap, low, bound, tonumber(ARGV[4]), function(_, _, score)
  scores[#scores + 1] = int(score)
  return true, true
end)
return {OK, due, table.concat(homes, ','), table.concat(scores, ','), keyed}
