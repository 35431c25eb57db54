-- KEYS: alive, owned (formats 1 to 4: a sorted set, each leased id scored by
-- its lease expiry), grants. ARGV: gen, prefix, chunk.
-- Moves up to `chunk` of the slot's leased ids from `owned` to the grants of
-- their records' expiry and owner (keys.GRANTS), and removes them from
-- `owned`; an id whose record is gone, dead or unowned is only removed. A run
-- cut short is carried on by the next. Reply {OK, moved, left in owned}.
if not alive() then return {GONE} end
local prefix = ARGV[2]
local ids = redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[3]) - 1)
local recs, by_grant, moved = load_all(prefix, ids, {}), {}, 0
for _, id in ipairs(ids) do
  local rec = recs[id]
  if rec and rec.o and not rec.dead then
    local g = int(rec.ts) .. ':' .. rec.o
    local members = by_grant[g]
    if not members then
      members = {at = int(rec.ts), owner = rec.o}
      by_grant[g] = members
    end
    members[#members + 1] = id
    moved = moved + 1
  end
end
for _, members in pairs(by_grant) do grant(prefix, KEYS[3], members.at, members.owner, members) end
bulk('ZREM', KEYS[2], ids)
return {OK, moved, redis.call('ZCARD', KEYS[2])}
