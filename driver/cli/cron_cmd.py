"""``dejaq cron add|list|show|pause|resume|update|delete``: schedules whose
occurrences become messages on a topic (on a priority topic, at the entry's
``--priority``)."""

from __future__ import annotations

import argparse
from typing import Any

from dejaq.core.cron import CronEntry, Misfire
from dejaq.core.model import KIND_PRIORITY
from dejaq.driver.admin import Admin
from dejaq.driver.cli.common import (
    add_broker,
    client_command,
    emit,
    iso,
    payload_fields,
    priority_value,
    timestamp_ms,
)
from dejaq.driver.cli.numbers import UINT32, whole
from dejaq.driver.client import Client
from dejaq.driver.cron import Cron

MISFIRES = [m.value for m in Misfire]


def register(sub: Any) -> None:
    cron = sub.add_parser("cron", help="cron entries: schedules that produce messages")
    csub = cron.add_subparsers(dest="cron_command", required=True, metavar="ACTION")

    p = csub.add_parser("add", help="add a cron entry to a topic")
    _names(p)
    p.add_argument("payload", help="the payload of every occurrence (text)")
    p.add_argument("--schedule", required=True, help='cron expression, e.g. "*/5 * * * *"')
    _options(p)
    p.add_argument("--paused", action="store_true", help="add it paused")
    add_broker(p)
    p.set_defaults(run=client_command(add))

    p = csub.add_parser("update", help="change a cron entry (from its next occurrence on)")
    _names(p)
    p.add_argument("--schedule", help="a new cron expression")
    p.add_argument("--payload", help="a new payload (text)")
    _options(p)
    add_broker(p)
    p.set_defaults(run=client_command(update))

    p = csub.add_parser("list", help="a topic's cron entries")
    p.add_argument("topic")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    add_broker(p)
    p.set_defaults(run=client_command(list_))

    p = csub.add_parser("show", help="a cron entry and its next occurrences")
    _names(p)
    p.add_argument(
        "--next", type=whole(UINT32), default=5, help="how many next occurrences (default 5)"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    add_broker(p)
    p.set_defaults(run=client_command(show))

    for action, fn, text in (
        ("pause", pause, "stop producing occurrences"),
        ("resume", resume, "go on from the next occurrence after now"),
        ("delete", delete, "delete a cron entry (occurrences already produced stay)"),
    ):
        p = csub.add_parser(action, help=text)
        _names(p)
        add_broker(p)
        p.set_defaults(run=client_command(fn))


def _names(p: argparse.ArgumentParser) -> None:
    p.add_argument("topic")
    p.add_argument("entry_id", metavar="ENTRY_ID")


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tz", help="IANA time zone of the schedule (default UTC)")
    p.add_argument("--start", help="no occurrence before: ISO 8601 or epoch ms")
    p.add_argument("--end", help="no occurrence after: ISO 8601 or epoch ms")
    p.add_argument("--misfire", choices=MISFIRES, help="missed while all was down (default once)")
    p.add_argument(
        "--misfire-limit", type=whole(UINT32), help="with --misfire all: at most this many"
    )
    p.add_argument(
        "--priority",
        type=whole(UINT32),
        help="priority topics: every occurrence's priority (default 0, the most urgent)",
    )


def _time(text: str | None) -> int | None:
    return None if text is None else timestamp_ms(text)


def _priority(value: int | None) -> int | None:
    return None if value is None else priority_value(value)


async def _with_priority(client: Client, topic: str) -> bool:
    """Whether entries of ``topic`` are shown with their priority (a priority topic)."""
    return (await Admin(client).describe_topic(topic)).topic.settings.kind == KIND_PRIORITY


async def add(client: Client, args: argparse.Namespace) -> int:
    entry = await Cron(client).add(
        args.topic,
        args.entry_id,
        args.schedule,
        args.payload.encode(),
        timezone=args.tz or "UTC",
        start_ms=_time(args.start) or 0,
        end_ms=_time(args.end) or 0,
        paused=args.paused,
        misfire=Misfire(args.misfire or "once"),
        misfire_limit=args.misfire_limit or 100,
        priority=_priority(args.priority) or 0,
    )
    print(f"added {entry.id}: {_summary(entry)}")
    return 0


async def update(client: Client, args: argparse.Namespace) -> int:
    entry = await Cron(client).update(
        args.topic,
        args.entry_id,
        schedule=args.schedule,
        timezone=args.tz,
        payload=None if args.payload is None else args.payload.encode(),
        start_ms=_time(args.start),
        end_ms=_time(args.end),
        misfire=None if args.misfire is None else Misfire(args.misfire),
        misfire_limit=args.misfire_limit,
        priority=_priority(args.priority),
    )
    print(f"updated {entry.id}: {_summary(entry)}")
    return 0


async def pause(client: Client, args: argparse.Namespace) -> int:
    entry = await Cron(client).pause(args.topic, args.entry_id)
    print(f"paused {entry.id}")
    return 0


async def resume(client: Client, args: argparse.Namespace) -> int:
    entry = await Cron(client).resume(args.topic, args.entry_id)
    print(f"resumed {entry.id}: {_summary(entry)}")
    return 0


async def delete(client: Client, args: argparse.Namespace) -> int:
    await Cron(client).delete(args.topic, args.entry_id)
    print(f"deleted {args.entry_id}")
    return 0


async def list_(client: Client, args: argparse.Namespace) -> int:
    cron = Cron(client)
    with_priority = await _with_priority(client, args.topic)
    after = ""
    while page := await cron.list(args.topic, after_id=after, limit=1000):
        for e in page:
            if args.json:
                emit(_json(e, with_priority))
            else:
                prio = f"priority {e.priority}  " if with_priority else ""
                print(f"{e.id}  {e.schedule}  {e.timezone}  {prio}{_summary(e)}")
        after = page[-1].id
    return 0


async def show(client: Client, args: argparse.Namespace) -> int:
    info = await Cron(client).get(args.topic, args.entry_id, upcoming=args.next)
    with_priority = await _with_priority(client, args.topic)
    e = info.entry
    if args.json:
        emit({**_json(e, with_priority), "upcoming": [iso(t) for t in info.upcoming_ms]})
        return 0
    print(f"entry      {e.id}  (topic {e.topic}, version {e.version})")
    print(f"schedule   {e.schedule}  ({e.timezone})")
    if with_priority:
        print(f"priority   {e.priority}")
    if e.start_ms or e.end_ms:
        start = iso(e.start_ms) if e.start_ms else "-"
        end = iso(e.end_ms) if e.end_ms else "-"
        print(f"window     {start} .. {end}")
    print(
        f"misfire    {e.misfire.value}"
        + (f" (up to {e.misfire_limit})" if e.misfire is Misfire.ALL else "")
    )
    print(f"state      {_state(e)}")
    for at in info.upcoming_ms:
        print(f"next       {iso(at)}  id {e.id}@{at}")
    return 0


def _state(e: CronEntry) -> str:
    return "paused" if e.paused else "ended" if not e.next_ms else "active"


def _summary(e: CronEntry) -> str:
    return _state(e) if not e.next_ms else f"next {iso(e.next_ms)}"


def _json(e: CronEntry, with_priority: bool) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "topic": e.topic,
        "id": e.id,
        "schedule": e.schedule,
        "timezone": e.timezone,
        "start_ms": e.start_ms,
        "end_ms": e.end_ms,
        "state": _state(e),
        "misfire": e.misfire.value,
        "misfire_limit": e.misfire_limit,
        "version": e.version,
        "next_ms": e.next_ms,
    }
    if with_priority:
        shown["priority"] = e.priority
    return {**shown, **payload_fields(e.payload)}
