-- KEYS: alive, heads, grants. ARGV: gen, prefix, now.
-- Reply {OK, keys, 'due,held,oldest,...'}: per key with messages due by now
-- or held under a live lease in the slot, the due ones (a ZCOUNT on each of
-- its lanes due by now: `heads` names them), those held (the slot's leased
-- messages of the grants after now whose records still name an owner, a
-- lease expiry after now and the key) and the earliest
-- due timestamp (0: none). Reads the due lanes and the leased records, never
-- a waiting message.
if not alive() then return {GONE} end
local prefix, now = ARGV[2], ARGV[3]
local found, order = {}, {}
local function of(key)
  local k = found[key]
  if not k then
    k = {due = 0, held = 0, oldest = 0}
    found[key] = k
    order[#order + 1] = key
  end
  return k
end
local lanes = redis.call('ZRANGE', KEYS[2], '-inf', now, 'BYSCORE', 'WITHSCORES')
for i = 1, #lanes, 2 do
  local key = string.match(lanes[i], '^%d+:(.*)$')
  if key then
    local k = of(key)
    k.due = k.due + redis.call('ZCOUNT', timeline(prefix, lanes[i]), '-inf', now)
    local head = tonumber(lanes[i + 1])
    if k.oldest == 0 or head < k.oldest then k.oldest = head end
  end
end
local held = granted_ids(prefix, redis.call('ZRANGE', KEYS[3], '(' .. now, '+inf', 'BYSCORE'))
local recs = load_all(prefix, held, {})
for _, id in ipairs(held) do
  local rec = recs[id]
  -- still leased (its timestamp is its lease's expiry), wherever it was listed
  if rec and rec.k ~= '' and not rec.dead and rec.o and rec.ts > tonumber(now) then
    local k = of(rec.k)
    k.held = k.held + 1
  end
end
local numbers = {}
for _, key in ipairs(order) do
  local k = found[key]
  push(numbers, int(k.due), int(k.held))
  numbers[#numbers + 1] = int(k.oldest)
end
return {OK, order, table.concat(numbers, ',')}
