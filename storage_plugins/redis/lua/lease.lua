-- KEYS: alive, timeline, owned, dead, dead-ids, stray-homes.
-- ARGV: gen, prefix, now, quota, bound, lease until, owner, max deliveries (the
-- topic's), solo ('1': refuse with STRAYS when strays of the bucket live elsewhere).
-- Takes due messages with timestamp <= bound (<= now), earliest first, until
-- `quota` are delivered; dead letters do not count against the quota.
-- Reply {OK, dead lettered, numbers, blob}: per delivery the numbers (due
-- timestamp, version, deliveries, id length, payload length), and the id then
-- the payload in the blob.
if not alive() then return {GONE} end
if ARGV[9] == '1' and redis.call('SCARD', KEYS[6]) > 0 then return {STRAYS} end
local prefix, now_s, quota, bound = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local lease_until, owner, topic_max = ARGV[6], ARGV[7], tonumber(ARGV[8])
local now = tonumber(now_s)
local numbers, blob, leased = {}, {}, {}
local taken, dead = 0, 0
while taken < quota do
  -- Dead and deleted ids leave the range at once; leased ones move to their
  -- lease expiry at the end (one ZADD), so until then skip them by offset.
  local ids = redis.call('ZRANGE', KEYS[2], '-inf', bound, 'BYSCORE',
                         'LIMIT', #leased / 2, quota - taken)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local rec = load(prefix, id)
    if not rec then
      redis.call('ZREM', KEYS[2], id)  -- an index entry without a record: drop it
    else
      local max = rec.md ~= 0 and rec.md or topic_max
      if dies_on_lease(rec.n, max, rec.ex, now) then
        kill(prefix, id, rec, now_s, KEYS[3], KEYS[4], KEYS[5])
        dead = dead + 1
      else
        local version, deliveries = rec.v + 1, rec.n + 1
        local payload = redis.call('GET', prefix .. K_PAYLOAD .. id) or ''
        push(numbers, int(rec.ts), int(version), int(deliveries), int(#id), int(#payload))
        push(blob, id, payload)
        if max == 1 then
          drop(prefix, id, rec, KEYS[3])  -- at-most-once: gone once delivered
        else
          redis.call('HSET', prefix .. K_RECORD .. id, 'ts', lease_until, 'o', owner,
                     'v', version, 'n', deliveries)
          push(leased, lease_until, id)
        end
        taken = taken + 1
      end
    end
  end
end
bulk('ZADD', KEYS[2], leased)
bulk('ZADD', KEYS[3], leased)
return {OK, dead, table.concat(numbers, ','), table.concat(blob)}
