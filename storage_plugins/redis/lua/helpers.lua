-- Helpers shared by the scripts. Each script gets only those it calls (and
-- what they call), in this order: define a helper after the helpers it calls.
-- Constants (K_*, OK, GONE, ...) come first, from redis_scripts.py.

local function alive()
  return redis.call('GET', KEYS[1]) == ARGV[1]
end

-- Append values (never nil: a nil would shift every later value).
local function push(t, ...)
  for i = 1, select('#', ...) do t[#t + 1] = select(i, ...) end
end

-- An integer as exact decimal text (tostring would round past 14 digits).
local function int(n)
  return string.format('%d', n)
end

local function timeline(prefix, bucket)
  return prefix .. K_TIMELINE .. bucket
end

-- redis.call(cmd, [key,] args...) for a long even-length list of args, in
-- chunks: Lua's unpack is bounded, and one call per chunk beats one per item.
local function bulk(cmd, key, args)
  for i = 1, #args, 1000 do
    local last = math.min(i + 999, #args)
    if key then
      redis.call(cmd, key, unpack(args, i, last))
    else
      redis.call(cmd, unpack(args, i, last))
    end
  end
end

-- The record's fields, in the order of READ replies.
local function fields(prefix, id)
  return redis.call('HMGET', prefix .. K_RECORD .. id, 'ts', 'v', 'n', 'o', 'b', 'md', 'ex', 'dead')
end

local function load(prefix, id)
  local r = fields(prefix, id)
  if not r[1] then return nil end
  return {ts = tonumber(r[1]), v = tonumber(r[2]), n = tonumber(r[3]), o = r[4], b = r[5],
          md = tonumber(r[6]), ex = tonumber(r[7]), dead = r[8] == '1'}
end

-- Delete a live message (ack, cancel, at-most-once delivery).
local function drop(prefix, id, rec, owned)
  redis.call('UNLINK', prefix .. K_RECORD .. id, prefix .. K_PAYLOAD .. id)
  redis.call('ZREM', timeline(prefix, rec.b), id)
  redis.call('ZREM', owned, id)
end

-- Move a live message to the dead timeline at `at` (a decimal string).
local function kill(prefix, id, rec, at, owned, dead, dead_ids)
  local key = prefix .. K_RECORD .. id
  redis.call('HSET', key, 'dead', 1, 'ts', at, 'v', rec.v + 1)
  redis.call('HDEL', key, 'o')
  redis.call('ZREM', timeline(prefix, rec.b), id)
  redis.call('ZREM', owned, id)
  redis.call('ZADD', dead, at, id)
  redis.call('ZADD', dead_ids, 0, id)
end

-- rules.check_holder
local function check_holder(rec, owner, version)
  if not rec or rec.dead then return NOT_FOUND end
  if rec.o ~= owner then return NOT_HOLDER end
  if rec.v ~= version then return STALE end
  return OK
end

-- rules.check_movable
local function check_movable(rec, version, now)
  if not rec or rec.dead then return NOT_FOUND end
  if rec.v ~= version then return STALE end
  if rec.o and rec.ts > now then return LEASED end
  return OK
end

-- rules.dies_on_lease
local function dies_on_lease(deliveries, max_deliveries, expires_at, now)
  if max_deliveries ~= 0 and deliveries >= max_deliveries then return true end
  return expires_at ~= 0 and expires_at <= now
end

-- A refused item: its code and the record's state, for rules.py to phrase.
local function refusal(numbers, owners, code, rec)
  push(numbers, int(code), int(rec and rec.v or 0), int(rec and rec.ts or 0))
  owners[#owners + 1] = rec and rec.o or ''
end
