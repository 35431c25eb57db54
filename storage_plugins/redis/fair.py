"""Max-min fair shares of a lease pass's limit among keys (base.py: fair lease
passes), the same rule as lua/lease.lua's within one slot: for a pass over
several slots, which ``leasing`` plans from each slot's due counts."""

from __future__ import annotations

from collections.abc import Mapping


def shares(
    due: Mapping[str, tuple[int, int]], limit: int, caps: Mapping[str, int] | None = None
) -> dict[str, int]:
    """How many of each key a pass of ``limit`` takes; ``due`` maps a key to its
    due count and earliest due timestamp. Rounds of equal shares of what is
    left among the keys not yet served in full; when fewer are left than such
    keys, the keys whose earliest is earliest (then by key) take one each."""
    caps = caps or {}
    most = {k: min(n, caps.get(k, n)) for k, (n, _) in due.items()}
    out = dict.fromkeys(due, 0)
    active = sorted((k for k in due if most[k] > 0), key=lambda k: (due[k][1], k))
    rest = limit
    while rest > 0 and active:
        if rest < len(active):
            for k in active[:rest]:
                out[k] += 1
            break
        each = rest // len(active)
        still = []
        for k in active:
            more = min(each, most[k] - out[k])
            out[k] += more
            rest -= more
            if out[k] < most[k]:
                still.append(k)
        active = still
    return {k: n for k, n in out.items() if n}
