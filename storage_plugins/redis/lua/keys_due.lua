-- KEYS: alive, heads, stray-homes. ARGV: gen, prefix, bound, asked buckets ('*'
-- or 'lo-hi,...'), with homes ('1' / '0').
-- Reply {OK, 'home,...', keys, 'due,first,...'}: the first step of a fair pass
-- over several slots (leasing.py): per key with messages of the asked buckets
-- due by bound in the slot ('' for those without a key), how many (a ZCOUNT a
-- lane) and its earliest head; and the stray homes of the slot's buckets.
if not alive() then return {GONE} end
local homes = {}
if ARGV[5] == '1' then homes = redis.call('SMEMBERS', KEYS[3]) end
local prefix, bound = ARGV[2], ARGV[3]
local heap = due_heads(KEYS[2], asked(ARGV[4]), bound)
local found, order = {}, {}
for _, item in ipairs(heap) do
  local lane = item[2]
  local key = type(lane) == 'number' and '' or string.match(lane, '^%d+:(.*)$')
  local k = found[key]
  if not k then
    k = {due = 0, first = item[1]}
    found[key] = k
    order[#order + 1] = key
  end
  k.due = k.due + redis.call('ZCOUNT', timeline(prefix, lane), '-inf', bound)
end
local numbers = {}
for _, key in ipairs(order) do push(numbers, int(found[key].due), int(found[key].first)) end
return {OK, table.concat(homes, ','), order, table.concat(numbers, ',')}
