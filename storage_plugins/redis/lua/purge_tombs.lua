-- KEYS: alive, graves. ARGV: gen, prefix, deleted before, limit, keep (0: no
-- count bound).
-- Forgets, the oldest first and up to `limit` in all, the tombstones of ids
-- deleted before the given time and those beyond the newest `keep`: both
-- rules take from the old end of `graves` (keys.GRAVES), read in chunks from
-- 16 entries (a sweep with nothing to forget reads one) up to 512. An entry whose id's field no longer holds its time (forgotten, or
-- the id deleted again since) is dropped from the list and not counted.
-- Reply {OK, forgotten, of which still inside the window (forgotten for the bound)}.
if not alive() then return {GONE} end
local graves, prefix = KEYS[2], ARGV[2]
local before, limit, keep = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local listed = redis.call('LLEN', graves)
local forgotten, inside, popped, done, chunk = 0, 0, 0, false, 16
while not done do
  local entries = redis.call('LRANGE', graves, popped, popped + chunk - 1)
  chunk = math.min(chunk * 2, 512)
  if #entries == 0 then break end
  local ids, gone = {}, {}
  for i, entry in ipairs(entries) do ids[i] = string.sub(entry, K_TOMB_SIZE + 1) end
  local fields = collect('HMGET', prefix .. K_RECORDS, ids)
  for i, entry in ipairs(entries) do
    local field = fields[i]
    if field and #field == K_TOMB_SIZE and field == string.sub(entry, 1, K_TOMB_SIZE) then
      local aged = struct.unpack(K_TOMB, field) < before
      local excess = keep > 0 and listed - popped > keep
      if forgotten >= limit or not (aged or excess) then
        done = true
        break
      end
      gone[#gone + 1] = ids[i]
      forgotten = forgotten + 1
      if not aged then inside = inside + 1 end
    end
    popped = popped + 1
  end
  bulk('HDEL', prefix .. K_RECORDS, gone)
end
if popped > 0 then redis.call('LTRIM', graves, popped, -1) end
return {OK, forgotten, inside}
