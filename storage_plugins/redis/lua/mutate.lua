-- KEYS: alive, owned. ARGV: gen, prefix, mode ('move' | 'cancel'), id, version, at, now.
-- Reply {OK, 'code,version,timestamp', owners} as SETTLE's, for one item.
if not alive() then return {GONE} end
local prefix, mode, id, at = ARGV[2], ARGV[3], ARGV[4], ARGV[6]
local rec = load(prefix, id)
local numbers, owners = {}, {}
local code = check_movable(rec, tonumber(ARGV[5]), tonumber(ARGV[7]))
if code ~= OK then
  refusal(numbers, owners, code, rec)
elseif mode == 'cancel' then
  drop(prefix, id, rec, KEYS[2])
  push(numbers, '0', '0', int(rec.ts))
else
  local key = prefix .. K_RECORD .. id
  redis.call('HSET', key, 'ts', at, 'v', rec.v + 1)
  redis.call('HDEL', key, 'o')
  redis.call('ZADD', timeline(prefix, rec.b), at, id)
  redis.call('ZREM', KEYS[2], id)
  push(numbers, '0', int(rec.v + 1), at)
end
return {OK, table.concat(numbers, ','), owners}
