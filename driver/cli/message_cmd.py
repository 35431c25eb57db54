"""``dejaq get|move|cancel``: one message by id."""

from __future__ import annotations

import argparse
from typing import Any

from dejaq.core.errors import InvalidArgument
from dejaq.core.model import KIND_PRIORITY
from dejaq.driver.admin import Admin
from dejaq.driver.cli.common import (
    add_broker,
    add_when,
    client_command,
    emit,
    iso,
    key_fields,
    payload_fields,
    when_ms,
)
from dejaq.driver.cli.numbers import INT64, UINT32, whole
from dejaq.driver.client import Client


def register(sub: Any) -> None:
    p = sub.add_parser("get", help="show a message")
    p.add_argument("topic")
    p.add_argument("id")
    add_broker(p)
    p.set_defaults(run=client_command(get))

    p = sub.add_parser(
        "move",
        help="reschedule a message that is not leased",
        description="Reschedule a message that is not leased: a new due time (--at, --in)"
        " on a timeline; on a priority topic a new not-before time and/or --priority"
        " (a priority alone keeps the not-before time).",
    )
    p.add_argument("topic")
    p.add_argument("id")
    add_when(p, required=False)
    p.add_argument("--priority", type=whole(UINT32), help="priority topics: the new priority")
    p.add_argument(
        "--version", type=whole(INT64), help="expected version (default: the current one)"
    )
    add_broker(p)
    p.set_defaults(run=client_command(move))

    p = sub.add_parser("cancel", help="delete a message that is not leased")
    p.add_argument("topic")
    p.add_argument("id")
    p.add_argument(
        "--version", type=whole(INT64), help="expected version (default: the current one)"
    )
    add_broker(p)
    p.set_defaults(run=client_command(cancel))


async def _version(admin: Admin, args: argparse.Namespace) -> int:
    # Without --version this is a read-then-write; the broker still refuses it
    # if the message changes in between.
    if args.version is not None:
        return int(args.version)
    return (await admin.get(args.topic, args.id)).message.version


async def get(client: Client, args: argparse.Namespace) -> int:
    admin = Admin(client)
    info = await admin.get(args.topic, args.id)
    m = info.message
    shown: dict[str, Any] = {
        "id": m.id,
        "timestamp_ms": m.timestamp,
        "time": iso(m.timestamp),
        "state": info.state,
        "version": m.version,
        "deliveries": m.deliveries,
        "lease_owner": m.lease_owner,
    }
    topic = (await admin.describe_topic(args.topic)).topic
    if topic.settings.kind == KIND_PRIORITY:
        shown["priority"] = m.priority  # and timestamp_ms: when it is (or was) available
    emit({**shown, **key_fields(info.key, info.headers), **payload_fields(m.payload)})
    return 0


async def move(client: Client, args: argparse.Namespace) -> int:
    admin = Admin(client)
    at = when_ms(args)
    if at is None and args.priority is None:
        raise InvalidArgument("give --at or --in (or --priority on a priority topic)")
    if args.priority is not None and args.priority < 0:
        raise InvalidArgument(f"priority {args.priority} must be 0 (most urgent) or more")
    if at is None:
        # A new priority alone keeps a not-before time still to come; a message
        # already available stays available (0: not-before passed).
        info = await admin.get(args.topic, args.id)
        at = info.message.timestamp if info.state == "waiting" else 0
        version = info.message.version if args.version is None else int(args.version)
    else:
        version = await _version(admin, args)
    r = await admin.move(args.topic, args.id, version, at, priority=args.priority)
    where = "" if args.priority is None else f"priority {args.priority}, available "
    print(f"moved {r.id} to {where}{iso(r.timestamp_ms)} (version {r.version})")
    return 0


async def cancel(client: Client, args: argparse.Namespace) -> int:
    admin = Admin(client)
    r = await admin.cancel(args.topic, args.id, await _version(admin, args))
    print(f"cancelled {r.id}")
    return 0
