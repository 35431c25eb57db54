"""What the client commands share: --broker, time parsing, output."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from dejaq.core.clock import now_ms
from dejaq.core.due_time import EARLIEST
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import MAX_TIMESTAMP
from dejaq.driver.cli.durations import duration
from dejaq.driver.client import DEFAULT_BROKER, Client
from dejaq.driver.tls import client_tls

_RATE = re.compile(r"(-?\d+(?:\.\d+)?)(?:/(s|m|min|h))?")
_PER_S = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
PAST_WARNING_MS = 60_000  # an --at further in the past is warned about


def add_broker(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker",
        help="HOST[:PORT][,HOST[:PORT]...] of brokers, port 7700 unless given"
        f" (default $DEJAQ_BROKER or {DEFAULT_BROKER})",
    )
    g = p.add_argument_group("security")
    g.add_argument("--tls-ca", help="PEM CA of the brokers' certificates: use TLS ($DEJAQ_TLS_CA)")
    g.add_argument("--tls-cert", help="PEM client certificate, for mutual TLS ($DEJAQ_TLS_CERT)")
    g.add_argument("--tls-key", help="PEM key of --tls-cert ($DEJAQ_TLS_KEY)")
    g.add_argument("--token", help="bearer token (prefer $DEJAQ_TOKEN: arguments show in ps)")


def connect(args: argparse.Namespace) -> Client:
    """A client from --broker and the security flags (each over its DEJAQ_* twin)."""
    tls = client_tls(args.tls_ca, args.tls_cert, args.tls_key)
    return Client(args.broker, tls=tls or False, token=args.token)


def client_command(
    fn: Callable[[Client, argparse.Namespace], Awaitable[int | None]],
) -> Callable[[argparse.Namespace], int]:
    """Run an async command against a client built from --broker."""

    def run(args: argparse.Namespace) -> int:
        async def main() -> int | None:
            async with connect(args) as client:
                return await fn(client, args)

        return asyncio.run(main()) or 0

    return run


def rate_per_s(text: str) -> float:
    """``5000/s``, ``300/m``, ``20/h``; a bare number is a second's."""
    m = _RATE.fullmatch(text.strip())
    if not m:
        raise InvalidArgument(f"{text!r} is not a rate (like 5000/s, 300/m, 20/h)")
    rate = float(m.group(1)) / _PER_S[m.group(2) or "s"]
    if rate <= 0:
        raise InvalidArgument(f"max rate {text!r} must be above 0 (to lift a cap: --max-rate none)")
    return rate


def rate_text(rate: float) -> str:
    return f"{rate:g}/s" if rate else "none"


def timestamp_ms(text: str) -> int:
    """ISO 8601 (``2026-11-21T09:00:00Z``; no zone means UTC) or epoch milliseconds."""
    if text.isdigit():
        ms = int(text)
    else:
        try:
            dt = datetime.fromisoformat(text)
        except ValueError as exc:
            raise InvalidArgument(f"{text!r} is not an ISO 8601 time or epoch ms") from exc
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        ms = int(dt.timestamp() * 1000)
    # Checked here, as the 64-bit wire fields cannot carry every number typed.
    if not 0 <= ms <= MAX_TIMESTAMP:
        raise InvalidArgument(f"time {text!r} is outside 1970-01-01 .. 9999-12-31")
    if 0 < ms < EARLIEST:
        raise InvalidArgument(
            f"time {text!r} is before 2001-09-09 in epoch ms: epoch seconds?"
            f" give milliseconds ({ms * 1000}) or an ISO 8601 time"
        )
    return ms


def add_when(p: argparse.ArgumentParser, required: bool) -> None:
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--at", help="when: ISO 8601 (UTC if no zone) or epoch ms")
    g.add_argument(
        "--in", dest="in_", metavar="DURATION", type=duration, help="when: from now, e.g. 30s, 5m"
    )


def when_ms(args: argparse.Namespace) -> int | None:
    if args.at is not None:
        at = timestamp_ms(args.at)
        late = now_ms() - at
        if at and late > PAST_WARNING_MS:  # 0: now, as meant
            # Legal (a time past means now), but likely not what was meant.
            print(
                f"dejaq: warning: --at {args.at} is {_ago(late)} in the past: due now",
                file=sys.stderr,
            )
        return at
    if args.in_ is not None:
        return now_ms() + int(args.in_)
    return None


def _ago(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000)):
        if ms >= size:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def priority_value(value: object) -> int:
    """A priority as given: a whole number from 0 (the topic checks the top)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(f"priority {value!r} must be a whole number, 0 (most urgent) or more")
    return value


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def payload_fields(payload: bytes) -> dict[str, str]:
    """Text payloads as ``payload``, anything else as base64 ``payload_base64``
    (the spelling of the HTTP API and of ``produce --jsonl``)."""
    try:
        return {"payload": payload.decode()}
    except UnicodeDecodeError:
        return {"payload_base64": base64.b64encode(payload).decode()}


def key_fields(key: str, headers: dict[str, str]) -> dict[str, Any]:
    """A message's ``key`` and ``headers`` (an object) for its JSON line, those it has."""
    shown: dict[str, Any] = {}
    if key:
        shown["key"] = key
    if headers:
        shown["headers"] = headers
    return shown


def emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
