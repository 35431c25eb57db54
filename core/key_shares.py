"""Each broker's share of a topic's limits per key.

Each broker leases only from the buckets its consumers own (disjoint), and a
key's messages are spread over the buckets by a hash of their id, so a broker
serving a fraction of the buckets sees that fraction of each key's backlog.

- A **rate** (deliveries a second) is shared as ``max_rate`` is
  (``broker/dispatch/rate.py``): each broker takes its fraction of the buckets.
- A **concurrency** (messages held at once) is a whole number: it is
  apportioned over the brokers with consumers of the topic by largest
  remainder of their bucket counts, ties by broker id, so the shares are whole
  and sum to the limit exactly. Every broker computes it from the same
  assignment (``broker/cluster/assignment.py``), so all agree once they have
  seen the same membership. A broker whose share is 0 leases none of the key
  (with a limit below the number of brokers, some brokers must hold none).
"""

from __future__ import annotations

from collections.abc import Mapping


def concurrency_share(limit: int, buckets_by_broker: Mapping[str, int], me: str) -> int:
    """``me``'s whole share of ``limit`` by largest remainder of its buckets
    (``buckets_by_broker``: every broker with consumers of the topic); all of
    it when no broker is known (a single broker)."""
    total = sum(buckets_by_broker.values())
    if total <= 0:
        return limit
    floors = {b: limit * n // total for b, n in buckets_by_broker.items()}
    left = limit - sum(floors.values())
    # Largest remainder first, ties by broker id: the same order on every broker.
    order = sorted(buckets_by_broker, key=lambda b: (-(limit * buckets_by_broker[b] % total), b))
    extra = set(order[:left])
    return floors.get(me, 0) + (1 if me in extra else 0)


def bucket_counts(owners: list[tuple[str, int]]) -> dict[str, int]:
    """Buckets per broker from ``(broker, buckets owned by one of its consumers)``."""
    out: dict[str, int] = {}
    for broker, n in owners:
        out[broker] = out.get(broker, 0) + n
    return out
