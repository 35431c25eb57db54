-- KEYS: the topic registry. ARGV: name, the registry entry read before.
-- Removes the entry only if it is still that one (not a re-created topic). Reply {OK, removed}.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return {OK, redis.call('HDEL', KEYS[1], ARGV[1])}
end
return {OK, 0}
