"""The ``dejaq`` command line with keys and headers: ``produce --key --header``
and ``--jsonl`` lines carry them, ``get``, ``consume`` and ``dead list`` show
them; a bad key or header is one readable line and stores nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.broker_process import Brokers
from tests.e2e.support import now_ms
from tests.e2e.test_cli import Cli, wait_for


@pytest.fixture
def cli(brokers: Brokers) -> Cli:
    return Cli(brokers.get("memory").address)


def test_produce_with_a_key_and_headers_then_get_and_consume_show_them(
    cli: Cli, topic_name: str
) -> None:
    # given a message produced with a key and two headers
    cli.ok("topic", "create", topic_name)
    out = cli.ok(
        "produce", topic_name, "hello", "--id", "m1", "--in", "1h", "--key", "tenant-é",
        "--header", "traceparent=00-abc-01", "--header", "schema=v2=final",
    )  # fmt: skip
    assert out.strip() == "accepted m1"
    # when it is read back, then get shows the key and the headers
    shown = cli.json("get", topic_name, "m1")
    assert shown["key"] == "tenant-é"
    assert shown["headers"] == {"traceparent": "00-abc-01", "schema": "v2=final"}
    # and a message without them shows neither
    cli.ok("produce", topic_name, "plain", "--id", "m2", "--in", "0s")
    assert not {"key", "headers"} & set(cli.json("get", topic_name, "m2"))
    # and consume prints them on the delivery's line
    cli.ok("move", topic_name, "m1", "--in", "0s")
    lines = {d["id"]: d for d in cli.lines("consume", topic_name, "--count", "2")}
    assert lines["m1"]["key"] == "tenant-é"
    assert lines["m1"]["headers"] == {"traceparent": "00-abc-01", "schema": "v2=final"}
    assert not {"key", "headers"} & set(lines["m2"])


def test_jsonl_lines_carry_key_and_headers_and_a_bad_one_is_refused_by_line(
    cli: Cli, topic_name: str, tmp_path: Path
) -> None:
    # given lines with a key and headers, and lines whose key or headers are bad
    cli.ok("topic", "create", topic_name, "--max-deliveries", "2", "--lease", "1s")
    far = 4_102_444_800_000
    lines = [
        {"id": "a", "timestamp_ms": far, "payload": "x", "key": "k-a", "headers": {"h": "v"}},
        {"id": "b", "timestamp_ms": far, "payload": "x", "key": "k" * 257},
        {"id": "c", "timestamp_ms": far, "payload": "x", "headers": {"bad name": "v"}},
        {"id": "d", "timestamp_ms": far, "payload": "x", "headers": ["not", "an", "object"]},
        {"id": "e", "timestamp_ms": far, "payload": "x", "key": 7},
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    # when they are produced
    done = cli.run("produce", topic_name, "--jsonl", str(path))
    # then the good line is stored with its key and headers, each bad one said by its number
    assert "accepted 1, duplicate 0, rejected 4" in done.stdout
    errors = done.stderr.splitlines()
    assert errors[0].startswith("line 2: rejected: a message key is at most 256 bytes")
    assert errors[1].startswith("line 3: rejected: header name 'bad name' is not an HTTP token")
    assert errors[2] == "line 4: rejected: headers must be an object of strings"
    assert errors[3] == "line 5: rejected: key must be a string"
    shown = cli.json("get", topic_name, "a")
    assert (shown["key"], shown["headers"]) == ("k-a", {"h": "v"})
    for mid in "bcde":
        assert "not found" in cli.fails("get", topic_name, mid)


def test_dead_list_shows_key_and_headers(cli: Cli, topic_name: str, tmp_path: Path) -> None:
    # given a message with a key and a header that expires before it is due, and
    # a healthy one after it
    cli.ok("topic", "create", topic_name)
    t = now_ms()
    lines = [
        {"id": "d1", "timestamp_ms": t + 300, "expires_at_ms": t + 100, "key": "k-dead",
         "headers": {"a": "b"}},
        {"id": "ok", "timestamp_ms": t + 301},
    ]  # fmt: skip
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cli.ok("produce", topic_name, "--jsonl", str(path))
    # when they fall due, only the healthy one is delivered
    assert [d["id"] for d in cli.lines("consume", topic_name, "--count", "1")] == ["ok"]
    # then the dead list shows the expired one's key and headers
    wait_for(lambda: cli.lines("dead", "list", topic_name) != [], "the message to expire")
    (dead,) = cli.lines("dead", "list", topic_name)
    assert (dead["id"], dead["key"], dead["headers"]) == ("d1", "k-dead", {"a": "b"})


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (["--key", "k" * 257], "--key: a message key is at most 256 bytes of UTF-8, not 257"),
        (["--key", "a\tb"], "--key: a message key may not hold control characters"),
        (["--header", "novalue"], "--header 'novalue': expected NAME=VALUE"),
        (["--header", "bad name=v"], "--header: header name 'bad name' is not an HTTP token"),
        (["--header", "a=1", "--header", "a=2"], "--header 'a' is given twice"),
        (
            [arg for i in range(65) for arg in ("--header", f"h{i}=v")],
            "--header: a message has at most 64 headers, not 65",
        ),
        (
            ["--header", "big=" + "v" * 9 * 1024],
            "--header: a message's headers are at most 8192 bytes in all, not 9219",
        ),
    ],
)
def test_a_bad_key_or_header_flag_is_one_line_and_stores_nothing(
    cli: Cli, topic_name: str, flags: list[str], why: str
) -> None:
    cli.ok("topic", "create", topic_name)
    error = cli.fails("produce", topic_name, "x", "--id", "bad", "--in", "1h", *flags)
    assert error == f"dejaq: error: {why}"
    assert "not found" in cli.fails("get", topic_name, "bad")
