-- KEYS: alive. ARGV: gen, prefix, ids...
-- Reply {OK, (found, ts, v, n, o, b, md, ex, dead, p, payload, key, headers)...}
-- in the order of ids.
if not alive() then return {GONE} end
local prefix = ARGV[2]
local out = {OK}
for i = 3, #ARGV do
  local id = ARGV[i]
  local r = load(prefix, id)
  if r then
    push(out, 1, int(r.ts), int(r.v), int(r.n), r.o or false, int(r.b), int(r.md), int(r.ex),
         r.dead and '1' or '0', int(r.p), payload_of(prefix, id, r), r.k,
         r.headed and redis.call('HGET', prefix .. K_HEADERS, id) or '')
  else
    push(out, 0, false, false, false, false, false, false, false, false, false, false, false,
         false)
  end
end
return out
