-- KEYS: alive. ARGV: gen, prefix, then ids.
-- Forgets the tombstones of the given ids (their fields of `records`; their
-- entries in `graves` are skipped when purge_tombs reaches them). Reply {OK,
-- forgotten}.
if not alive() then return {GONE} end
local prefix, ids = ARGV[2], {}
for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
local fields, gone, seen = collect('HMGET', prefix .. K_RECORDS, ids), {}, {}
for i, id in ipairs(ids) do
  if fields[i] and not stored(fields[i]) and not seen[id] then
    seen[id] = true
    gone[#gone + 1] = id
  end
end
bulk('HDEL', prefix .. K_RECORDS, gone)
return {OK, #gone}
