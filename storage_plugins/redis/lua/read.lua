-- KEYS: alive. ARGV: gen, prefix, ids...
-- Reply {OK, (found, ts, v, n, o, b, md, ex, dead, p, payload)...} in the order of ids.
if not alive() then return {GONE} end
local prefix = ARGV[2]
local out = {OK}
for i = 3, #ARGV do
  local id = ARGV[i]
  local r = fields(prefix, id)
  if r[1] then
    push(out, 1, r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
         redis.call('GET', prefix .. K_PAYLOAD .. id))
  else
    push(out, 0, false, false, false, false, false, false, false, false, false, false)
  end
end
return out
