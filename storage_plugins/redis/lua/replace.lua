-- KEYS: the topic registry. ARGV: name, the registry entry read before, the new entry.
-- Replaces the entry only if it is still the one read. Reply {OK, replaced}.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return {OK, 1}
end
return {OK, 0}
