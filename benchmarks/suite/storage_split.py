"""One Redis node against the Redis Cluster, step by step of the same steady ramp.

Per step of each: msgs/s delivered, and the redis-server CPU a delivered message
(from /proc): the node's own, and on the cluster each master's. The cluster's
split across its masters: each master's share of the masters' keys (the
messages waiting, with their slots' indexes), of their scripts (EVALSHA) and of
their commands (Lua's own calls included), against an even split (1 / masters),
and whether every share is within ``EVEN_WITHIN`` of it.

The capacity argument (benchmarks/README.md): a master's CPU a message is what
one node's is when it holds 1 / masters of the messages, so with an even split a
cluster of M masters holds M times the rate one node holds, as long as each
master has a core of its own (this 2-core machine has not).
"""

from __future__ import annotations

from typing import Any

EVEN_WITHIN = 0.15  # a share within ±15% of 1 / masters is even
SINGLE, CLUSTER = "redis", "redis-cluster"


def _steps(results: dict[str, Any], backend: str) -> list[dict[str, Any]]:
    steady = (results.get("backends") or {}).get(backend, {}).get("steady")
    return list(steady.get("steps", [])) if isinstance(steady, dict) else []


def shares(nodes: dict[str, dict[str, Any]], field: str) -> list[float]:
    """Each master's share of ``field`` over the masters (empty when none has any)."""
    values = [float(v.get(field) or 0) for k, v in nodes.items() if k.startswith("master")]
    total = sum(values)
    return [v / total for v in values] if total else []


def even(split: list[float]) -> bool | None:
    """Every share within ``EVEN_WITHIN`` of an even one (None: nothing to split)."""
    if not split:
        return None
    fair = 1 / len(split)
    return all(abs(s - fair) <= EVEN_WITHIN * fair for s in split)


def rows(results: dict[str, Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for s in _steps(results, SINGLE):
        server = s.get("server") or {}
        delivered = s.get("delivered_per_s") or 0
        store = server.get("store_cpu_percent")
        us = round(store * 1e4 / delivered, 1) if store is not None and delivered else None
        out.append([SINGLE, s["rate"], delivered, s.get("holds"), us, "-", "-", "-", "-"])
    for s in _steps(results, CLUSTER):
        nodes = (s.get("server") or {}).get("store_nodes") or {}
        masters = {k: v for k, v in nodes.items() if k.startswith("master")}
        us = "/".join(str(v.get("cpu_us_per_message")) for v in masters.values())
        held = [
            (v.get("cpu_us_per_message") or 0) / share
            for v, share in zip(masters.values(), shares(masters, "scripts_per_s"), strict=False)
            if share
        ]
        us += " (" + "/".join(f"{x:.1f}" for x in held) + " a message it handled)"
        cells = []
        for field in ("keys", "scripts_per_s", "commands_per_s"):
            split = shares(masters, field)
            cells.append("/".join(f"{100 * x:.0f}" for x in split) or "-")
        split_ok = [even(shares(masters, f)) for f in ("keys", "scripts_per_s")]
        verdict = "-" if None in split_ok else ("yes" if all(split_ok) else "NO")
        delivered = s.get("delivered_per_s")
        out.append([CLUSTER, s["rate"], delivered, s.get("holds"), us, *cells, verdict])
    return out


HEADER = [
    "",
    "asked/s",
    "delivered/s",
    "holds",
    "server CPU us/msg (each master)",
    "keys % (masters)",
    "scripts %",
    "commands %",
    "even ±15%",
]
TITLE = (
    "steady, one Redis node against the cluster (3 masters, 3 replicas) in the same run:"
    " redis-server CPU a delivered message from /proc; keys, scripts (EVALSHA) and"
    " commands (Lua's calls included) as each master's share"
)
