"""``dejaq topic create|set|pause|resume|list|describe|forecast|keys|delete``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from dejaq.core.errors import AlreadyExists, InvalidArgument
from dejaq.core.model import KIND_PRIORITY, KIND_TIMELINE, KINDS, TopicSettings, Webhook
from dejaq.driver.admin import Admin
from dejaq.driver.cli import key_cmd
from dejaq.driver.cli.common import (
    add_broker,
    client_command,
    emit,
    iso,
    rate_per_s,
    rate_text,
)
from dejaq.driver.cli.durations import duration, milliseconds
from dejaq.driver.cli.forecast_view import histogram
from dejaq.driver.cli.numbers import INT64, UINT32, whole
from dejaq.driver.client import Client

_KIND_FIELDS = ("kind", "priorities", "aging_ms")  # shown on the kind line
_PAUSE_FIELDS = ("paused", "paused_at_ms", "resumed_at_ms")  # shown on the state line
_KEY_FIELDS = ("key_concurrency", "key_rate", "key_burst", "key_limits")  # the per key line
_MAX_RATE_HELP = "cap deliveries across the cluster, e.g. 5000/s, 300/m (default: no cap)"


def register(sub: Any) -> None:
    topic = sub.add_parser("topic", help="create, list, describe, delete topics")
    tsub = topic.add_subparsers(dest="topic_command", required=True, metavar="ACTION")

    p = tsub.add_parser("create", help="create a topic")
    p.add_argument("name")
    p.add_argument("--buckets", type=whole(UINT32), default=0, help="bucket count (default 64)")
    p.add_argument(
        "--lease", type=duration, metavar="DURATION", help="default lease, e.g. 30s (default 30s)"
    )
    p.add_argument(
        "--max-deliveries", type=whole(UINT32), default=0, help="0 = unlimited, 1 = at most once"
    )
    p.add_argument("--max-payload", type=whole(INT64), default=0, help="bytes (default 1 MiB)")
    p.add_argument(
        "--dead-retention",
        type=duration,
        metavar="DURATION",
        help="how long dead messages are kept, e.g. 7d",
    )
    p.add_argument(
        "--expiry",
        type=duration,
        metavar="DURATION",
        help="dead-letter messages still undelivered this long after due",
    )
    p.add_argument(
        "--dedup-window",
        type=duration,
        metavar="DURATION",
        help="how long a deleted message's id stays taken (resends are duplicates),"
        " e.g. 24h (default 24h; 0 = free at once)",
    )
    p.add_argument("--max-rate", help=_MAX_RATE_HELP)
    p.add_argument(
        "--kind",
        default=KIND_TIMELINE,
        help="timeline (by due time, the default) or priority (most urgent first)",
    )
    p.add_argument(
        "--priorities",
        type=whole(UINT32),
        default=0,
        help="priority topics: priorities 0 (most urgent) .. N-1 (default 100)",
    )
    aging = p.add_mutually_exclusive_group()
    aging.add_argument(
        "--aging",
        type=duration,
        metavar="DURATION",
        help="priority topics: a message waiting this long ranks a priority higher,"
        " e.g. 10s (default: no aging)",
    )
    aging.add_argument(
        "--aging-ms", dest="aging", type=milliseconds, metavar="MS", help="--aging in ms"
    )
    p.add_argument(
        "--deliver-to",
        metavar="URL",
        help="POST each due message to this URL (a webhook topic, see docs/webhooks.md)",
    )
    _webhook_flags(p)
    p.add_argument(
        "--deliver-secret",
        metavar="SECRET",
        help="the webhook's signing secret (default: the broker makes one, printed once)",
    )
    p.add_argument(
        "--exist-ok",
        action="store_true",
        help="succeed when the topic exists with these settings (one with other settings"
        " is refused, naming each difference)",
    )
    add_broker(p)
    p.set_defaults(run=client_command(create))

    p = tsub.add_parser(
        "set", help="change a running topic's rate cap, lease, max deliveries or webhook"
    )
    p.add_argument("name")
    p.add_argument("--max-rate", help=_MAX_RATE_HELP + "; none lifts it")
    p.add_argument(
        "--lease", type=duration, metavar="DURATION", help="default lease of new consumers"
    )
    p.add_argument(
        "--max-deliveries", type=whole(UINT32), help="0 = unlimited, 1 = at most once (from now on)"
    )
    p.add_argument(
        "--deliver-to", metavar="URL", help="POST due messages to this URL; none stops it"
    )
    _webhook_flags(p)
    p.add_argument(
        "--rotate-secret", action="store_true", help="a new webhook signing secret (printed)"
    )
    p.add_argument("--show-secret", action="store_true", help="print the webhook's signing secret")
    key_cmd.add_limit_flags(p, "key-")
    add_broker(p)
    p.set_defaults(run=client_command(set_))

    for action, doc in (
        ("pause", "stop deliveries cluster-wide (produces are still stored)"),
        ("resume", "deliver again: the backlog goes out at once, in due order"),
    ):
        p = tsub.add_parser(action, help=doc)
        p.add_argument("name")
        add_broker(p)
        p.set_defaults(run=client_command(pause if action == "pause" else resume))

    p = tsub.add_parser("list", help="list topics")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    add_broker(p)
    p.set_defaults(run=client_command(list_))

    p = tsub.add_parser("describe", aliases=["show"], help="settings and live counts of a topic")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_broker(p)
    p.set_defaults(run=client_command(describe))

    key_cmd.register_topic_keys(tsub)

    p = tsub.add_parser("forecast", help="how many messages fall due ahead, as a histogram")
    p.add_argument("name")
    p.add_argument(
        "--horizon",
        type=duration,
        default=3_600_000,
        metavar="DURATION",
        help="how far ahead, rounded up to whole steps (default 1h)",
    )
    p.add_argument(
        "--step", type=duration, default=60_000, metavar="DURATION", help="bin width (default 1m)"
    )
    p.add_argument("--json", action="store_true", help="print the bins as JSON")
    add_broker(p)
    p.set_defaults(run=client_command(forecast))

    p = tsub.add_parser("delete", help="delete a topic and all its messages")
    p.add_argument("name")
    add_broker(p)
    p.set_defaults(run=client_command(delete))


def _webhook_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--deliver-timeout",
        type=duration,
        metavar="DURATION",
        help="a webhook request's whole time, e.g. 10s (default 10s)",
    )
    p.add_argument(
        "--deliver-concurrency",
        type=whole(UINT32),
        metavar="N",
        help="webhook requests in flight per broker (default 64)",
    )
    p.add_argument(
        "--deliver-header",
        action="append",
        metavar="NAME=VALUE",
        help="a header added to every webhook request (repeat for more)",
    )
    p.add_argument(
        "--deliver-backoff",
        type=duration,
        metavar="DURATION",
        help="first retry delay after a failed request, doubled each time (default 1s)",
    )


def _headers(items: list[str] | None) -> tuple[tuple[str, str], ...] | None:
    if items is None:
        return None
    pairs = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidArgument(f"--deliver-header {item!r}: expected NAME=VALUE")
        pairs.append((name.strip(), value))
    return tuple(pairs)


def _webhook(args: argparse.Namespace, current: Webhook | None) -> Webhook | None:
    """The webhook the flags ask for, over ``current``; None when they name none."""
    changes: dict[str, Any] = {}
    if args.deliver_timeout is not None:
        changes["timeout_ms"] = args.deliver_timeout
    if args.deliver_concurrency is not None:
        changes["concurrency"] = args.deliver_concurrency
    headers = _headers(args.deliver_header)
    if headers is not None:
        changes["headers"] = headers
    if args.deliver_backoff is not None:
        changes["backoff_ms"] = args.deliver_backoff
    if getattr(args, "deliver_secret", None):
        changes["secret"] = args.deliver_secret
    if args.deliver_to:
        current = Webhook(args.deliver_to) if current is None else current
        changes["url"] = args.deliver_to
    if current is None:
        if changes:
            raise InvalidArgument("the --deliver-* flags need --deliver-to URL")
        return None
    return dataclasses.replace(current, **{"secret": "", **changes}) if changes else None


def _webhook_wanted(args: argparse.Namespace) -> bool:
    names = ("deliver_to", "deliver_timeout", "deliver_concurrency", "deliver_header")
    return any(getattr(args, n) is not None for n in (*names, "deliver_backoff"))


def _kind_settings(args: argparse.Namespace) -> dict[str, Any]:
    """``kind``, ``priorities`` and ``aging_ms`` from the flags (the broker checks
    the ranges); priority flags on a timeline are a mistake, said here."""
    kind = args.kind.strip().lower()
    if kind not in KINDS:
        raise InvalidArgument(f"unknown topic kind {args.kind!r}: {' or '.join(KINDS)}")
    aging_ms = args.aging or 0
    if kind != KIND_PRIORITY and (args.priorities or args.aging is not None):
        raise InvalidArgument("--priorities and --aging are for priority topics (--kind priority)")
    return {"kind": kind, "priorities": args.priorities, "aging_ms": aging_ms}


def _settings_dict(settings: TopicSettings) -> dict[str, Any]:
    """Settings for display: a webhook without its secret (never shown here)."""
    d = dataclasses.asdict(settings)
    if d.get("webhook") is not None:
        d["webhook"].pop("secret", None)
    return d


def _kind_text(settings: TopicSettings) -> str:
    """``timeline``, or ``priority (priorities=N, aging=...)``."""
    if settings.kind != KIND_PRIORITY:
        return settings.kind
    aging = f"{settings.aging_ms}ms" if settings.aging_ms else "none"
    return f"{settings.kind} (priorities={settings.priorities}, aging={aging})"


async def create(client: Client, args: argparse.Namespace) -> int:
    kind = _kind_settings(args)
    d = TopicSettings()
    settings = TopicSettings(
        buckets=args.buckets or d.buckets,
        lease_ms=d.lease_ms if args.lease is None else args.lease,
        max_deliveries=args.max_deliveries,
        max_payload_bytes=args.max_payload or d.max_payload_bytes,
        dead_retention_ms=args.dead_retention or 0,
        expiry_ms=args.expiry or 0,
        dedup_window_ms=d.dedup_window_ms if args.dedup_window is None else args.dedup_window,
        max_rate=rate_per_s(args.max_rate) if args.max_rate else 0.0,
        webhook=_webhook(args, None),
        **kind,
    )
    admin = Admin(client)
    try:
        topic = await admin.create_topic(args.name, settings)
    except AlreadyExists:
        if not args.exist_ok:
            raise
        # The broker judges "the same settings" (or names each difference).
        topic = await admin.create_topic(args.name, settings, exist_ok=True)
        print(f"topic {topic.name} exists with these settings")
        return 0
    kind_note = f" ({_kind_text(topic.settings)})" if topic.settings.kind != KIND_TIMELINE else ""
    print(f"created topic {topic.name}{kind_note}")
    hook = topic.settings.webhook
    if hook is not None:
        print(f"delivering to {hook.url}")
        if not args.deliver_secret:  # made by the broker: shown now, kept by the operator
            print(f"signing secret {hook.secret}")
    return 0


async def set_(client: Client, args: argparse.Namespace) -> int:
    admin = Admin(client)
    none = args.deliver_to is not None and args.deliver_to.strip().lower() == "none"
    wanted = _webhook_wanted(args) or args.rotate_secret or args.show_secret
    delivery = args.lease is not None or args.max_deliveries is not None
    key_limits = (args.key_concurrency, args.key_rate, args.key_burst)
    keyed = any(v is not None for v in key_limits)
    if args.max_rate is None and not wanted and not delivery and not keyed:
        raise InvalidArgument(
            "say what to change: --max-rate, --lease, --max-deliveries, --deliver-to,"
            " a --deliver-* flag or a --key-* limit"
        )
    if keyed:
        topic = await admin.set_key_limits(args.name, *key_limits)
        print(f"topic {topic.name}: per key {key_cmd.limits_text(topic.settings.key_defaults())}")
    if delivery:
        topic = await admin.set_delivery(args.name, args.lease, args.max_deliveries)
        s = topic.settings
        limit = s.max_deliveries or "unlimited"
        print(f"topic {topic.name}: lease {s.lease_ms} ms, max deliveries {limit}")
    if args.max_rate is not None:
        rate = None if args.max_rate.strip().lower() == "none" else rate_per_s(args.max_rate)
        topic = await admin.set_max_rate(args.name, rate)
        print(f"topic {topic.name}: max rate {rate_text(topic.settings.max_rate)}")
    if none:
        topic = await admin.set_webhook(args.name, None)
        print(f"topic {topic.name}: no webhook")
    elif _webhook_wanted(args):
        current = (await admin.describe_topic(args.name)).topic.settings.webhook
        hook = _webhook(args, current)
        assert hook is not None
        topic = await admin.set_webhook(args.name, hook, args.rotate_secret)
        print(f"topic {topic.name}: delivering to {hook.url}")
        if args.rotate_secret and topic.settings.webhook is not None:
            print(f"signing secret {topic.settings.webhook.secret}")
    elif args.rotate_secret:
        topic = await admin.rotate_webhook_secret(args.name)
        assert topic.settings.webhook is not None
        print(f"signing secret {topic.settings.webhook.secret}")
    if args.show_secret and not args.rotate_secret:
        print(f"signing secret {await admin.webhook_secret(args.name)}")
    return 0


async def list_(client: Client, args: argparse.Namespace) -> int:
    topics = await Admin(client).list_topics()
    width = max((len(t.name) for t in topics), default=0)
    for t in topics:
        if args.json:
            emit({"name": t.name, **_settings_dict(t.settings)})
        else:
            paused = "  paused" if t.settings.paused else ""
            print(f"{t.name:<{width}}  {_kind_text(t.settings)}{paused}")
    return 0


async def describe(client: Client, args: argparse.Namespace) -> int:
    info = await Admin(client).describe_topic(args.name)
    settings = _settings_dict(info.topic.settings)
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
    hidden = (*_KIND_FIELDS, *_PAUSE_FIELDS, *_KEY_FIELDS, "webhook")
    shown = {k: v for k, v in settings.items() if k not in hidden}
    print(f"kind       {_kind_text(info.topic.settings)}")
    print(f"state      {_state_text(info.topic.settings)}")
    print("settings   " + "  ".join(f"{k}={v}" for k, v in shown.items()))
    hook = info.topic.settings.webhook
    if hook is not None:
        print(
            f"webhook    {hook.url}  timeout_ms={hook.timeout_ms}"
            f"  concurrency={hook.concurrency}  backoff_ms={hook.backoff_ms}"
            f"  headers={','.join(k for k, _ in hook.headers) or '-'}"
        )
    per_key = info.topic.settings.key_defaults()
    if per_key.any:
        print(f"per key    {key_cmd.limits_text(per_key)}")
    print("messages   " + "  ".join(f"{k}={v}" for k, v in counts.items()))
    print(f"consumers  {info.consumers}")
    print(f"next due   {_next_due(info.topic.settings, info.next_due_ms)}")
    return 0


def _state_text(settings: TopicSettings) -> str:
    """``running``, or ``paused since ...``."""
    if settings.paused:
        return f"paused since {iso(settings.paused_at_ms)} (nothing is delivered)"
    return "running"


async def pause(client: Client, args: argparse.Namespace) -> int:
    topic = await Admin(client).pause_topic(args.name)
    print(f"topic {topic.name}: paused since {iso(topic.settings.paused_at_ms)}")
    return 0


async def resume(client: Client, args: argparse.Namespace) -> int:
    topic = await Admin(client).resume_topic(args.name)
    print(f"topic {topic.name}: running")
    return 0


async def forecast(client: Client, args: argparse.Namespace) -> int:
    if args.horizon <= 0 or args.step <= 0:
        raise InvalidArgument("--horizon and --step must be positive durations")
    result = await Admin(client).forecast(args.name, args.horizon, args.step)
    if args.json:
        bins = [{"start_ms": start, "count": n} for start, n in result.bins]
        emit(
            {
                "topic": args.name,
                "start_ms": result.start_ms,
                "step_ms": result.step_ms,
                "bins": bins,
            }
        )
        return 0
    print("\n".join(histogram(args.name, result)))
    return 0


async def delete(client: Client, args: argparse.Namespace) -> int:
    await Admin(client).delete_topic(args.name)
    print(f"deleted topic {args.name}")
    return 0


def _next_due(settings: TopicSettings, next_due_ms: int | None) -> str:
    if not next_due_ms:
        return "-"
    if settings.kind == KIND_PRIORITY and next_due_ms < 0:
        return "now (messages available)"  # a rank: something waits at its priority
    return iso(next_due_ms)
