"""Who owns which bucket: a pure function of a topic's consumers, no leader.

Scheme: **contiguous ranges over the sorted consumers.** The consumers of a
topic are sorted by ``(broker, consumer id)``; with ``n`` of them and ``B``
buckets, the ``i``-th owns ``[i*B // n, (i+1)*B // n)``. Every broker
computes this from the same watched etcd membership, so all agree once they
have seen the same revision.

What it promises:

- **disjoint and covering**: each bucket has exactly one owner (while the
  topic has a consumer at all);
- **balanced**: shares differ by at most one bucket (a consumer gets none only
  when there are more consumers than buckets);
- **stable under unrelated changes**: a topic's assignment depends only on the
  set of its own consumers and its bucket count. Consumers coming and going on
  other topics, brokers without consumers of the topic joining or leaving,
  heartbeats and hints move none of its buckets.

What it does not promise: minimal movement. A consumer joining or leaving a
topic shifts the range boundaries, so up to all of the topic's buckets change
owner. That is cheap here because rebalancing moves no data (the timeline
stays in storage; the new owner's dispatcher just leases from it) and
correctness never depends on it: while brokers disagree for a watch round-trip
a bucket may have two owners (storage's atomic lease still gives each message
one holder) or none (its messages wait a few milliseconds). Rendezvous
hashing would move fewer buckets but balances 64 buckets over a handful of
consumers much worse, and balance is what throughput needs.
"""

from __future__ import annotations

from collections.abc import Iterable

Member = tuple[str, str]  # (broker, consumer id)


def assign(members: Iterable[Member], bucket_count: int) -> dict[Member, range]:
    """Each member's share of ``range(bucket_count)``."""
    ordered = sorted(set(members))
    n = len(ordered)
    return {
        m: range(i * bucket_count // n, (i + 1) * bucket_count // n) for i, m in enumerate(ordered)
    }


def owned_by(members: Iterable[Member], broker: str, bucket_count: int) -> frozenset[int]:
    """The union of the shares of ``broker``'s consumers."""
    return frozenset(
        b
        for (owner, _), share in assign(members, bucket_count).items()
        if owner == broker
        for b in share
    )


def as_ranges(buckets: Iterable[int]) -> list[tuple[int, int]]:
    """``{0, 1, 2, 5, 7, 8}`` as inclusive ranges ``[(0, 2), (5, 5), (7, 8)]``."""
    out: list[tuple[int, int]] = []
    for b in sorted(set(buckets)):
        if out and out[-1][1] == b - 1:
            out[-1] = (out[-1][0], b)
        else:
            out.append((b, b))
    return out
