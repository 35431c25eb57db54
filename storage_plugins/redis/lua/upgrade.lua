-- KEYS: alive. ARGV: gen, prefix, ids...
-- Moves messages of the slot from the version 1 layout (keys.V1_RECORD and
-- keys.V1_PAYLOAD: a hash and a string a message) into the slot's `records`
-- (a payload inline) and `payloads` (one too large to be); an id with no version 1 record (upgraded already) is skipped,
-- so a run cut short can be run again. Reply {OK, upgraded}.
if not alive() then return {GONE} end
local prefix = ARGV[2]
local records, payloads, old = {}, {}, {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local key, body = prefix .. K_V1_RECORD .. id, prefix .. K_V1_PAYLOAD .. id
  local r = redis.call('HMGET', key, 'ts', 'v', 'n', 'o', 'b', 'md', 'ex', 'dead', 'p')
  if r[1] then
    local rec = {ts = tonumber(r[1]), v = tonumber(r[2]), n = tonumber(r[3]), o = r[4] or nil,
                 b = tonumber(r[5]), md = tonumber(r[6]), ex = tonumber(r[7]),
                 dead = r[8] == '1', p = tonumber(r[9]) or 0, apart = false, body = ''}
    local payload = redis.call('GET', body) or ''
    if #payload <= K_INLINE_MAX then
      rec.body = payload
    else
      rec.apart = true
      push(payloads, id, payload)
    end
    push(records, id, encode(rec))
    push(old, key, body)
  end
end
bulk('HSET', prefix .. K_RECORDS, records)
bulk('HSET', prefix .. K_PAYLOADS, payloads)
bulk('UNLINK', nil, old)
return {OK, #records / 2}
