-- KEYS: alive, heads. ARGV: gen, prefix, bound, asked buckets ('*' or
-- 'lo-hi,...'), then keys as columns (columns.py: the keys, their lengths, how
-- many of each).
-- Reply {OK, 'count,...', 'score,...'}: the second step of a fair pass over
-- several slots (leasing.py): per key, the first due timestamps of its messages
-- in the asked buckets of the slot, up to its count, in order (merged along
-- its lanes, as the pass would take them); the counts say where each key's end.
if not alive() then return {GONE} end
local prefix, bound = ARGV[2], ARGV[3]
local heap = due_heads(KEYS[2], asked(ARGV[4]), bound)
local names, wants = cut(ARGV[5], ARGV[6]), decimals(ARGV[7])
local lanes = {}
for _, item in ipairs(heap) do
  local lane = item[2]
  local key = type(lane) == 'number' and '' or string.match(lane, '^%d+:(.*)$')
  lanes[key] = lanes[key] or {}
  local own = lanes[key]
  own[#own + 1] = item  -- in score order: a heap
end
local counts, scores = {}, {}
for i, key in ipairs(names) do
  local before = #scores
  if lanes[key] then
    walk(prefix, lanes[key], '-inf', bound, tonumber(wants[i]), function(_, _, score)
      scores[#scores + 1] = int(score)
      return true, true
    end)
  end
  counts[i] = #scores - before
end
return {OK, table.concat(counts, ','), table.concat(scores, ',')}
