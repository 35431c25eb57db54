-- KEYS: alive, owned, dead, dead-ids.
-- ARGV: gen, prefix, mode ('ack' | 'extend' | 'nack'), owner, time (extend: until,
-- nack: at), max deliveries (the topic's), then (id, version) pairs.
-- Reply {OK, numbers, owners}: per item its code, version and timestamp; per
-- refused item (code > 0; it changed nothing) the owner ('' for none) in owners.
if not alive() then return {GONE} end
local prefix, mode, owner, time, topic_max = ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local numbers, owners = {}, {}
for i = 7, #ARGV, 2 do
  local id = ARGV[i]
  local rec = load(prefix, id)
  local code = check_holder(rec, owner, tonumber(ARGV[i + 1]))
  if code ~= OK then
    refusal(numbers, owners, code, rec)
  elseif mode == 'ack' then
    drop(prefix, id, rec, KEYS[2])
    push(numbers, '0', '0', int(rec.ts))
  else
    local max = rec.md ~= 0 and rec.md or topic_max
    if mode == 'nack' and max ~= 0 and rec.n >= max then
      kill(prefix, id, rec, time, KEYS[2], KEYS[3], KEYS[4])
      push(numbers, '0', '0', time)
    else
      local key = prefix .. K_RECORD .. id
      redis.call('HSET', key, 'ts', time, 'v', rec.v + 1)
      redis.call('ZADD', timeline(prefix, rec.b), time, id)
      if mode == 'extend' then
        redis.call('ZADD', KEYS[2], time, id)
      else
        redis.call('HDEL', key, 'o')
        redis.call('ZREM', KEYS[2], id)
      end
      push(numbers, '0', int(rec.v + 1), time)
    end
  end
end
return {OK, table.concat(numbers, ','), owners}
