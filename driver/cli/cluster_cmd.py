"""``dejaq cluster status``: brokers, clock skew, topics, consumers and their buckets."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from dejaq.driver.cli.common import add_broker, client_command, emit, iso
from dejaq.driver.client import Client
from dejaq.driver.cluster import ClusterStatus, cluster_status


def register(sub: Any) -> None:
    cluster = sub.add_parser("cluster", help="the cluster of brokers")
    csub = cluster.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    p = csub.add_parser(
        "status",
        help="brokers, topics, consumers and bucket ownership",
        description="The cluster as the broker asked sees it.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_broker(p)
    p.set_defaults(run=client_command(status))


async def status(client: Client, args: argparse.Namespace) -> int:
    s = await cluster_status(client)
    if args.json:
        emit(dataclasses.asdict(s))
    else:
        print("\n".join(render(s)))
    return 0


def render(s: ClusterStatus) -> list[str]:
    """The human-readable report."""
    if s.mode == "single":
        head = f"single broker {s.broker} (no etcd)"
    else:
        state = "etcd reachable" if s.healthy else "ETCD UNREACHABLE: last known view"
        head = f"cluster {s.cluster} ({state}), as seen by {s.broker}"
    lines = [head, "", "brokers"]
    for b in s.brokers:
        skew = "skew ?" if b.skew_ms is None else f"skew {b.skew_ms:+d} ms"
        me = "  (answering)" if b.id == s.broker else ""
        lines.append(f"  {b.address:<24} started {iso(b.started_at_ms)}  {skew}{me}")
    lines += ["", "topics"]
    if not s.topics:
        lines.append("  (none)")
    for t in s.topics:
        n = len(t.consumers)
        lines.append(f"  {t.name}  ({t.buckets} buckets, {n} consumer{'' if n == 1 else 's'})")
        for c in t.consumers:
            ranges = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in c.buckets) or "none"
            lines.append(f"    {c.id:<28} on {c.broker:<24} buckets {ranges}")
    return lines
