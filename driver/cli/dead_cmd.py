"""``dejaq dead list|redrive``: the dead timeline."""

from __future__ import annotations

import argparse
from typing import Any

from dejaq.driver.admin import Admin
from dejaq.driver.cli.common import (
    add_broker,
    add_when,
    client_command,
    emit,
    key_fields,
    payload_fields,
    when_ms,
)
from dejaq.driver.cli.numbers import UINT32, whole
from dejaq.driver.client import Client


def register(sub: Any) -> None:
    dead = sub.add_parser("dead", help="inspect and re-drive dead messages")
    dsub = dead.add_subparsers(dest="dead_command", required=True, metavar="ACTION")

    p = dsub.add_parser("list", help="list dead messages (JSON lines, by id)")
    p.add_argument("topic")
    p.add_argument("--limit", type=whole(UINT32), default=100)
    p.add_argument("--after", default="", help="page on: ids after this one")
    add_broker(p)
    p.set_defaults(run=client_command(list_))

    p = dsub.add_parser("redrive", help="put dead messages back on the timeline")
    p.add_argument("topic")
    p.add_argument("ids", nargs="*", help="message ids (default: every dead message)")
    add_when(p, required=False)
    add_broker(p)
    p.set_defaults(run=client_command(redrive))


async def list_(client: Client, args: argparse.Namespace) -> int:
    for info in await Admin(client).list_dead(args.topic, args.limit, args.after):
        m = info.message
        emit(
            {
                "id": m.id,
                "died_at_ms": m.timestamp,
                "deliveries": m.deliveries,
                **key_fields(info.key, info.headers),
                **payload_fields(m.payload),
            }
        )
    return 0


async def redrive(client: Client, args: argparse.Namespace) -> int:
    n = await Admin(client).redrive(args.topic, args.ids, when_ms(args) or 0)
    print(f"redriven {n}")
    return 0
