"""``dejaq topic create|set|list|describe|delete``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.cli.common import (
    add_broker,
    client_command,
    duration_ms,
    emit,
    iso,
    rate_per_s,
    rate_text,
)
from dejaq.driver.client import Client

_MAX_RATE_HELP = "cap deliveries across the cluster, e.g. 5000/s, 300/m (default: no cap)"


def register(sub: Any) -> None:
    topic = sub.add_parser("topic", help="create, list, describe, delete topics")
    tsub = topic.add_subparsers(dest="topic_command", required=True, metavar="ACTION")

    p = tsub.add_parser("create", help="create a topic")
    p.add_argument("name")
    p.add_argument("--buckets", type=int, default=0, help="bucket count (default 64)")
    p.add_argument("--lease", help="default lease, e.g. 30s (default 30s)")
    p.add_argument("--max-deliveries", type=int, default=0, help="0 = unlimited, 1 = at most once")
    p.add_argument("--max-payload", type=int, default=0, help="bytes (default 1 MiB)")
    p.add_argument("--dead-retention", help="how long dead messages are kept, e.g. 7d")
    p.add_argument("--expiry", help="dead-letter messages still undelivered this long after due")
    p.add_argument("--max-rate", help=_MAX_RATE_HELP)
    add_broker(p)
    p.set_defaults(run=client_command(create))

    p = tsub.add_parser("set", help="change a running topic's delivery rate cap")
    p.add_argument("name")
    p.add_argument("--max-rate", required=True, help=_MAX_RATE_HELP + "; none lifts it")
    add_broker(p)
    p.set_defaults(run=client_command(set_))

    p = tsub.add_parser("list", help="list topics")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    add_broker(p)
    p.set_defaults(run=client_command(list_))

    p = tsub.add_parser("describe", help="settings and live counts of a topic")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_broker(p)
    p.set_defaults(run=client_command(describe))

    p = tsub.add_parser("delete", help="delete a topic and all its messages")
    p.add_argument("name")
    add_broker(p)
    p.set_defaults(run=client_command(delete))


async def create(client: Client, args: argparse.Namespace) -> int:
    d = TopicSettings()
    settings = TopicSettings(
        buckets=args.buckets or d.buckets,
        lease_ms=duration_ms(args.lease) if args.lease else d.lease_ms,
        max_deliveries=args.max_deliveries,
        max_payload_bytes=args.max_payload or d.max_payload_bytes,
        dead_retention_ms=duration_ms(args.dead_retention) if args.dead_retention else 0,
        expiry_ms=duration_ms(args.expiry) if args.expiry else 0,
        max_rate=rate_per_s(args.max_rate) if args.max_rate else 0.0,
    )
    topic = await Admin(client).create_topic(args.name, settings)
    print(f"created topic {topic.name}")
    return 0


async def set_(client: Client, args: argparse.Namespace) -> int:
    rate = None if args.max_rate.strip().lower() == "none" else rate_per_s(args.max_rate)
    topic = await Admin(client).set_max_rate(args.name, rate)
    print(f"topic {topic.name}: max rate {rate_text(topic.settings.max_rate)}")
    return 0


async def list_(client: Client, args: argparse.Namespace) -> int:
    for t in await Admin(client).list_topics():
        if args.json:
            emit({"name": t.name, **dataclasses.asdict(t.settings)})
        else:
            print(t.name)
    return 0


async def describe(client: Client, args: argparse.Namespace) -> int:
    info = await Admin(client).describe_topic(args.name)
    settings = dataclasses.asdict(info.topic.settings)
    counts = dataclasses.asdict(info.counts)
    out = {
        "name": info.topic.name,
        "settings": settings,
        "counts": counts,
        "consumers": info.consumers,
        "next_due_ms": info.next_due_ms,
        "created_at_ms": info.topic.created_at_ms,
    }
    if args.json:
        emit(out)
        return 0
    print(f"topic      {info.topic.name}  (created {iso(info.topic.created_at_ms)})")
    print("settings   " + "  ".join(f"{k}={v}" for k, v in settings.items()))
    print("messages   " + "  ".join(f"{k}={v}" for k, v in counts.items()))
    print(f"consumers  {info.consumers}")
    print(f"next due   {iso(info.next_due_ms) if info.next_due_ms else '-'}")
    return 0


async def delete(client: Client, args: argparse.Namespace) -> int:
    await Admin(client).delete_topic(args.name)
    print(f"deleted topic {args.name}")
    return 0
