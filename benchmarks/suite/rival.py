"""The rival: a hand-rolled Redis sorted-set delay queue, as one writes it in an afternoon.

Due times are the scores of one sorted set (``ZADD``), payloads sit in one hash
(``HSET``). A poller runs ``POP_DUE`` every millisecond: ``ZRANGEBYSCORE -inf
now LIMIT n`` and, in the same script, re-scores what it took to ``now +
lease`` (a lease: a crashed poller's messages come due again, at-least-once as
dejaq), returning ids, due times and payloads. The ack is ``ZREM`` + ``HDEL``
in one pipeline per popped batch. No versions, buckets or dead letters.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from .messages import PAYLOAD

QUEUE, PAYLOADS = "rival:queue", "rival:payloads"
POP_BATCH = 1000
LEASE_MS = 30_000

# KEYS: queue, payloads. ARGV: now (ms), limit, lease until (ms).
# Returns {flat {id, score, ...}, payloads} or {} when nothing is due.
POP_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
if #due == 0 then return {} end
local ids, leased = {}, {}
for i = 1, #due, 2 do
  ids[#ids + 1] = due[i]
  leased[#leased + 1] = ARGV[3]
  leased[#leased + 1] = due[i]
end
redis.call('ZADD', KEYS[1], 'XX', unpack(leased))
return {due, redis.call('HMGET', KEYS[2], unpack(ids))}
"""


async def insert(r: Redis, ids: Sequence[str], dues: Sequence[int]) -> int:
    """Store messages in one pipeline (ZADD + HSET, no transaction); how many."""
    pipe = r.pipeline(transaction=False)
    pipe.zadd(QUEUE, dict(zip(ids, dues, strict=True)))
    pipe.hset(PAYLOADS, mapping=dict.fromkeys(ids, PAYLOAD))  # type: ignore[arg-type]
    await pipe.execute()
    return len(ids)


async def ack(r: Redis, ids: Sequence[bytes]) -> None:
    pipe = r.pipeline(transaction=False)
    pipe.zrem(QUEUE, *ids)
    pipe.hdel(PAYLOADS, *ids)  # type: ignore[arg-type]
    await pipe.execute()
