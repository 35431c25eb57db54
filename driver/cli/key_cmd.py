"""``dejaq key set|show|list|remove`` (a key's override of its topic's limits)
and ``dejaq topic keys`` (the busiest keys)."""

from __future__ import annotations

import argparse
from typing import Any

from dejaq.core.errors import InvalidArgument
from dejaq.core.key_limits import KeyLimit, Limits
from dejaq.driver.admin import Admin
from dejaq.driver.cli.common import add_broker, client_command, emit, rate_per_s, rate_text
from dejaq.driver.cli.numbers import UINT32, whole
from dejaq.driver.client import Client
from dejaq.driver.key_info import KeyInfo, KeyLimitInfo

_RATE_HELP = "deliveries a second for one key, e.g. 100/s, 300/m; none (or 0) lifts it"


def key_rate(text: str) -> float:
    """``100/s``, ``300/m``...; ``none`` or ``0``: no limit."""
    if text.strip().lower() in ("none", "0"):
        return 0.0
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(f"{text!r}: a key's rate is above 0 (none lifts it)")
    try:
        return rate_per_s(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_limit_flags(p: argparse.ArgumentParser, prefix: str) -> None:
    """``--{prefix}concurrency``, ``--{prefix}rate``, ``--{prefix}burst``."""
    p.add_argument(
        f"--{prefix}concurrency",
        type=whole(UINT32),
        metavar="N",
        help="messages of one key held (leased) at once across the cluster; 0 lifts it",
    )
    p.add_argument(f"--{prefix}rate", type=key_rate, metavar="RATE", help=_RATE_HELP)
    p.add_argument(
        f"--{prefix}burst",
        type=whole(UINT32),
        metavar="B",
        help="deliveries one key may make at once after a quiet time (0: one)",
    )


def limits_text(limits: Limits) -> str:
    concurrency = limits.concurrency or "none"
    burst = f" burst {limits.burst}" if limits.rate and limits.burst else ""
    return f"concurrency {concurrency}, rate {rate_text(limits.rate)}{burst}"


def register(sub: Any) -> None:
    key = sub.add_parser("key", help="limits of one key of a topic (its override)")
    ksub = key.add_subparsers(dest="key_command", required=True, metavar="ACTION")

    p = ksub.add_parser("set", help="override a topic's limits for one key")
    p.add_argument("topic")
    p.add_argument("key")
    add_limit_flags(p, "")
    add_broker(p)
    p.set_defaults(run=client_command(set_))

    p = ksub.add_parser("show", help="a key's limits as they apply, and its override")
    p.add_argument("topic")
    p.add_argument("key")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_broker(p)
    p.set_defaults(run=client_command(show))

    p = ksub.add_parser("list", help="the keys with an override, in key order")
    p.add_argument("topic")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    add_broker(p)
    p.set_defaults(run=client_command(list_))

    p = ksub.add_parser("remove", help="drop a key's override: the topic's limits apply again")
    p.add_argument("topic")
    p.add_argument("key")
    add_broker(p)
    p.set_defaults(run=client_command(remove))


def register_topic_keys(tsub: Any) -> None:
    """``dejaq topic keys NAME``: under ``topic``."""
    p = tsub.add_parser("keys", help="the busiest keys: due backlog, held, lateness, limits")
    p.add_argument("name")
    p.add_argument("--limit", type=whole(UINT32), default=10, help="how many keys (default 10)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    add_broker(p)
    p.set_defaults(run=client_command(busiest))


async def set_(client: Client, args: argparse.Namespace) -> int:
    if args.concurrency is None and args.rate is None and args.burst is None:
        raise InvalidArgument("say what to set: --concurrency, --rate or --burst")
    info = await Admin(client).set_key_limit(
        args.topic, args.key, args.concurrency, args.rate, args.burst
    )
    print(f"key {info.key!r} of topic {info.topic}: {limits_text(info.limits)}")
    return 0


def _override_dict(o: KeyLimit | None) -> dict[str, Any] | None:
    return None if o is None else o.to_dict()


def _info_dict(info: KeyLimitInfo) -> dict[str, Any]:
    return {
        "topic": info.topic,
        "key": info.key,
        "concurrency": info.limits.concurrency,
        "rate": info.limits.rate,
        "burst": info.limits.burst,
        "override": _override_dict(info.override),
    }


async def show(client: Client, args: argparse.Namespace) -> int:
    info = await Admin(client).key_limit(args.topic, args.key)
    if args.json:
        emit(_info_dict(info))
        return 0
    source = "its override" if info.override is not None else "the topic's"
    print(f"key {info.key!r} of topic {info.topic}: {limits_text(info.limits)} ({source})")
    return 0


async def list_(client: Client, args: argparse.Namespace) -> int:
    admin = Admin(client)
    after = ""
    while True:
        page = await admin.key_limits(args.topic, after)
        for o in page:
            if args.json:
                emit(o.to_dict())
            else:
                fields = [f"{k}={v}" for k, v in o.to_dict().items() if k != "key"]
                print(f"{o.key}  {'  '.join(fields)}")
        if len(page) < 1000:
            return 0
        after = page[-1].key


async def remove(client: Client, args: argparse.Namespace) -> int:
    await Admin(client).remove_key_limit(args.topic, args.key)
    print(f"key {args.key!r} of topic {args.topic}: override removed")
    return 0


def _load_dict(k: KeyInfo) -> dict[str, Any]:
    return {
        "key": k.key,
        "due": k.due,
        "held": k.held,
        "oldest_ms": k.oldest_ms,
        "lateness_ms": k.lateness_ms,
        "concurrency": k.limits.concurrency,
        "rate": k.limits.rate,
        "burst": k.limits.burst,
    }


async def busiest(client: Client, args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 1000:
        raise InvalidArgument(f"--limit is 1 to 1000, not {args.limit}")
    loads = await Admin(client).busiest_keys(args.name, args.limit)
    if args.json:
        for k in loads:
            emit(_load_dict(k))
        return 0
    if not loads:
        print(f"topic {args.name}: no key has messages due or held")
        return 0
    width = max(len(k.key) for k in loads)
    print(f"{'KEY':<{width}}  {'DUE':>8}  {'HELD':>6}  {'LATE':>10}  LIMITS")
    for k in loads:
        late = f"{k.lateness_ms} ms" if k.due else "-"
        print(f"{k.key:<{width}}  {k.due:>8}  {k.held:>6}  {late:>10}  {limits_text(k.limits)}")
    return 0
