"""``dejaq produce``: one message, or many from JSON lines."""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from dejaq.core import headers as header_codec
from dejaq.core.clock import now_ms
from dejaq.core.due_time import DUE_TIME, EXPIRY
from dejaq.core.errors import InvalidArgument
from dejaq.core.keys import check_key
from dejaq.core.model import MAX_TIMESTAMP, InsertStatus, OnDuplicate
from dejaq.core.wire.frames import MAX_MESSAGE_PAYLOAD, PRODUCE_FRAME_BYTES
from dejaq.driver.cli.common import (
    PAST_WARNING_MS,
    add_broker,
    add_when,
    client_command,
    priority_value,
    when_ms,
)
from dejaq.driver.cli.feed import Feed
from dejaq.driver.cli.numbers import UINT32
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer

BATCH = 1000  # lines sent together at most (the producer cuts them into frames)
BATCH_BYTES = 4 * PRODUCE_FRAME_BYTES  # payload bytes read ahead at most
# A line's fields: HTTP's, and payload_b64, the older spelling of payload_base64.
FIELDS = (
    "id", "timestamp_ms", "payload", "payload_base64", "payload_b64",
    "priority", "max_deliveries", "expires_at_ms", "key", "headers", "on_duplicate",
)  # fmt: skip


def register(sub: Any) -> None:
    p = sub.add_parser(
        "produce",
        help="schedule messages",
        description="Schedule one message (PAYLOAD, or --payload-file PATH for any bytes, with"
        " --at or --in, or --priority on a priority topic, where --at/--in are a not-before"
        " time), or many with --jsonl:"
        ' one {"id", "timestamp_ms", "payload", "priority"} object a line ("payload_base64"'
        ' for binary, also spelt "payload_b64"; "max_deliveries", "expires_at_ms", "key",'
        ' "headers" (an object), "on_duplicate" as over HTTP; without timestamp_ms a message'
        " with a priority is available now).",
    )
    p.add_argument("topic")
    p.add_argument("payload", nargs="?", help="the message payload (text)")
    p.add_argument("--id", default="", help="message id (default: generated)")
    add_when(p, required=False)
    p.add_argument(
        "--priority",
        type=int,
        help="priority topics: 0 is the most urgent (without --at/--in: available now)",
    )
    p.add_argument(
        "--payload-file",
        metavar="PATH",
        help="the payload: PATH's bytes as they are (any bytes), or - for stdin",
    )
    p.add_argument("--key", default="", help="whose message it is: a tenant, a user, a campaign")
    p.add_argument(
        "--header",
        action="append",
        metavar="NAME=VALUE",
        help="a header the consumer receives with the message (repeat for more)",
    )
    p.add_argument(
        "--on-duplicate",
        default="keep",
        metavar="keep|replace|extend",
        help="when the id is already waiting: keep it (default), replace it with this message"
        " (a trailing debounce) or extend it to this due time; with --jsonl, for the lines"
        " that do not say",
    )
    p.add_argument("--jsonl", metavar="FILE", help="read messages from FILE, or - for stdin")
    add_broker(p)
    p.set_defaults(run=client_command(produce), trailing="payload")


async def produce(client: Client, args: argparse.Namespace) -> int:
    try:
        OnDuplicate.named(args.on_duplicate)
    except InvalidArgument as exc:
        raise InvalidArgument(f"--on-duplicate: {exc}") from None
    if args.jsonl:
        one = (args.payload, args.payload_file, args.at, args.in_, args.id or None, args.priority)
        if any(given is not None for given in one) or args.key or args.header:
            raise InvalidArgument(
                "--jsonl takes no PAYLOAD, --payload-file, --id, --at, --in, --priority, --key"
                " or --header (a line gives its own)"
            )
        return await _produce_lines(client, args)
    if args.payload is not None and args.payload_file is not None:
        raise InvalidArgument("give PAYLOAD or --payload-file, not both")
    priority = 0 if args.priority is None else priority_value(args.priority)
    at = when_ms(args)
    if at is None and args.priority is not None:
        at = now_ms()  # a priority alone: available now
    if (args.payload is None and args.payload_file is None) or at is None:
        raise InvalidArgument(
            "give a PAYLOAD and --at or --in, or --priority on a priority topic (or --jsonl"
            " FILE); --payload-file PATH gives the PAYLOAD from a file"
        )
    try:
        key = check_key(args.key)
    except InvalidArgument as exc:
        raise InvalidArgument(f"--key: {exc}") from None
    headers = _flag_headers(args.header)
    payload = (
        args.payload.encode() if args.payload is not None else _read_payload(args.payload_file)
    )
    out = Outgoing(
        payload,
        at,
        args.id,
        priority=priority,
        key=key,
        headers=headers,
        on_duplicate=args.on_duplicate,
    )
    async with Producer(client, args.topic) as producer:
        (result,) = await producer.send_batch([out])
    if result.status == InsertStatus.REJECTED:
        raise InvalidArgument(f"rejected: {result.error}")
    print(f"{result.status.name.lower()} {result.id}")
    return 0


def _flag_headers(items: list[str] | None) -> dict[str, str] | None:
    """The ``--header NAME=VALUE`` flags as headers, checked (core/headers.py)."""
    if not items:
        return None
    headers: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InvalidArgument(f"--header {item!r}: expected NAME=VALUE")
        if name in headers:
            raise InvalidArgument(f"--header {name!r} is given twice")
        headers[name] = value
    try:
        return header_codec.check_headers(headers)
    except InvalidArgument as exc:
        raise InvalidArgument(f"--header: {exc}") from None


def _read_payload(path: str) -> bytes:
    """The bytes of ``path`` (``-``: stdin) as they are, whatever they hold; a
    file that cannot be read is said in one line."""
    source = "stdin" if path == "-" else path
    try:
        if path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {source}: {exc.strerror or exc}") from None


async def _produce_lines(client: Client, args: argparse.Namespace) -> int:
    counts = {s: 0 for s in InsertStatus}
    source = "stdin" if args.jsonl == "-" else args.jsonl
    try:
        stream: BinaryIO = sys.stdin.buffer if args.jsonl == "-" else open(args.jsonl, "rb")  # noqa: ASYNC230
    except OSError as exc:
        raise InvalidArgument(f"cannot read {source}: {exc.strerror or exc}") from None
    # Read in a thread: a pipe's line goes on as it comes, and a file's next
    # lines are read while the ones before travel.
    feed = Feed(_parse(stream, args.on_duplicate), _payload_size, BATCH, BATCH_BYTES)
    past = 0  # lines due more than a minute before they were read: legal, told once
    try:
        async with Producer(client, args.topic) as producer:
            while (lines := await _read(feed, source)) is not None:
                batch: list[tuple[int, Outgoing]] = []
                long_ago = now_ms() - PAST_WARNING_MS
                for lineno, item in lines:
                    if isinstance(item, str):
                        counts[InsertStatus.REJECTED] += 1
                        print(f"line {lineno}: {item}", file=sys.stderr)
                    else:
                        past += 0 < item.timestamp_ms < long_ago  # 0: now, as meant
                        batch.append((lineno, item))
                await _send(producer, batch, counts)
    finally:
        feed.close()
        if stream is not sys.stdin.buffer:
            stream.close()
    if past:
        print(
            f"dejaq: warning: {past} line{'s' * (past != 1)} due more than a minute in the past:"
            " due now",
            file=sys.stderr,
        )
    changed = "".join(
        f", {s.name.lower()} {counts[s]}"
        for s in (InsertStatus.REPLACED, InsertStatus.EXTENDED, InsertStatus.LEASED)
        if counts[s]
    )
    print(
        f"accepted {counts[InsertStatus.ACCEPTED]}, duplicate {counts[InsertStatus.DUPLICATE]},"
        f" rejected {counts[InsertStatus.REJECTED]}{changed}"
    )
    return 1 if counts[InsertStatus.REJECTED] else 0


async def _read(feed: Feed[tuple[int, Outgoing | str]], source: str) -> list[Any] | None:
    try:
        return await feed.batch()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {source}: {exc.strerror or exc}") from None


def _payload_size(line: tuple[int, Outgoing | str]) -> int:
    return 0 if isinstance(line[1], str) else len(line[1].payload)


async def _send(
    producer: Producer, batch: list[tuple[int, Outgoing]], counts: dict[InsertStatus, int]
) -> None:
    if not batch:
        return
    results = await producer.send_batch([m for _, m in batch])
    for (lineno, _), r in zip(batch, results, strict=True):
        counts[r.status] += 1
        if r.error is not None:
            print(f"line {lineno}: {r.error}", file=sys.stderr)


def _parse(
    stream: Iterable[bytes], on_duplicate: str = "keep"
) -> Iterator[tuple[int, Outgoing | str]]:
    """Each line as a message, or as the reason it is not one; ``on_duplicate``
    for a line that does not give its own."""
    for lineno, raw in enumerate(stream, 1):
        try:
            line = raw.decode()
        except UnicodeDecodeError as exc:
            yield lineno, f"not UTF-8 text: byte {exc.start + 1} is 0x{raw[exc.start]:02x}"
            continue
        if not line.strip():
            continue
        try:
            yield lineno, _message(_json(line), on_duplicate)
        except NotJson as exc:
            yield lineno, str(exc)
        except (ValueError, KeyError, binascii.Error, InvalidArgument) as exc:
            reason = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            yield lineno, f"rejected: {reason}"


def _message(obj: Any, on_duplicate: str = "keep") -> Outgoing:
    """A line's object as a message: the fields HTTP takes, no other (a key
    misspelt would otherwise be dropped, its value lost without a word)."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    unknown = [k for k in obj if k not in FIELDS]
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} (the fields: {', '.join(FIELDS)})")
    priority = priority_value(obj["priority"]) if "priority" in obj else 0
    ts = obj["timestamp_ms"] if "timestamp_ms" in obj or "priority" not in obj else now_ms()
    if not isinstance(ts, int) or isinstance(ts, bool):
        raise ValueError("timestamp_ms must be an integer")
    if err := DUE_TIME.error(ts):
        raise ValueError(err)
    mid = obj.get("id", "")
    if not isinstance(mid, str):
        raise ValueError("id must be a string")
    payload = _payload(obj)
    if len(payload) > MAX_MESSAGE_PAYLOAD:
        raise ValueError(
            f"a payload of {len(payload)} bytes does not fit any frame"
            f" (at most {MAX_MESSAGE_PAYLOAD} bytes)"
        )
    max_deliveries = _whole(obj, "max_deliveries", UINT32)
    expires_at = _whole(obj, "expires_at_ms", MAX_TIMESTAMP)
    if err := EXPIRY.error(expires_at):
        raise ValueError(err)
    key = obj.get("key", "")
    if not isinstance(key, str):
        raise ValueError("key must be a string")
    headers = obj.get("headers", {})
    if not isinstance(headers, dict):
        raise ValueError("headers must be an object of strings")
    checked = header_codec.check_headers(headers) if headers else None
    mode = obj.get("on_duplicate", on_duplicate)
    if not isinstance(mode, str):
        raise ValueError("on_duplicate must be one of keep, replace, extend")
    OnDuplicate.named(mode)
    return Outgoing(
        payload, ts, mid, max_deliveries, expires_at, priority, check_key(key), checked, mode
    )


def _payload(obj: dict[str, Any]) -> bytes:
    given = [k for k in ("payload", "payload_base64", "payload_b64") if k in obj]
    if len(given) > 1:
        raise ValueError(f"give one of {' or '.join(given)}, not both")
    if not given:
        return b""
    value = obj[given[0]]
    if not isinstance(value, str):
        raise ValueError(f"{given[0]} must be a string")
    if given[0] == "payload":
        return value.encode()
    return base64.b64decode(value, validate=True)


def _whole(obj: dict[str, Any], name: str, most: int) -> int:
    value = obj.get(name, 0)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= most:
        raise ValueError(f"{name} must be a whole number from 0 to {most}")
    return value


class NotJson(ValueError):
    """A line that does not parse as JSON."""


def _json(line: str) -> Any:
    """The line's value; ``NotJson`` says why not, by column (the file's line
    number is the caller's: the parser's own line and char offsets are noise)."""
    text = line.rstrip("\r\n")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotJson(f"not valid JSON: {exc.msg} at column {exc.colno}") from None
