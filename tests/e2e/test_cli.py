"""The ``dejaq`` command line against a broker on SQLite, run as users run it:
a separate process per command, the broker from ``--broker`` or ``DEJAQ_BROKER``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.broker_process import BrokerProcess, Brokers
from tests.e2e.support import now_ms

TIMEOUT_S = 30
POLL_S = 0.05


def _command() -> list[str]:
    """The installed ``dejaq`` console script (next to this Python), else the module."""
    script = shutil.which("dejaq", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "dejaq.driver.cli.main"]


DEJAQ = _command()


@pytest.fixture
def broker(brokers: Brokers) -> BrokerProcess:
    return brokers.get("sqlite")


class Cli:
    """Runs ``dejaq`` commands against one broker."""

    def __init__(self, address: str) -> None:
        self.address = address

    def run(
        self, *args: str, stdin: str | None = None, via_env: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """``dejaq ARGS --broker ADDRESS``, or with ``DEJAQ_BROKER`` set instead."""
        env = {k: v for k, v in os.environ.items() if k != "DEJAQ_BROKER"}
        argv = [*DEJAQ, *args]
        if via_env:
            env["DEJAQ_BROKER"] = self.address
        else:
            argv += ["--broker", self.address]
        return subprocess.run(
            argv, input=stdin, capture_output=True, text=True, env=env, timeout=TIMEOUT_S
        )

    def ok(self, *args: str, stdin: str | None = None, via_env: bool = False) -> str:
        """Run a command that must succeed; its stdout."""
        done = self.run(*args, stdin=stdin, via_env=via_env)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout

    def fails(self, *args: str, stdin: str | None = None) -> str:
        """Run a command that must fail readably; its error line."""
        done = self.run(*args, stdin=stdin)
        assert done.returncode == 1, (args, done.returncode, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("dejaq: error: "), done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        return done.stderr.strip()

    def json(self, *args: str, via_env: bool = False) -> Any:
        return json.loads(self.ok(*args, via_env=via_env))

    def lines(self, *args: str) -> list[Any]:
        return [json.loads(line) for line in self.ok(*args).splitlines()]


@pytest.fixture
def cli(broker: BrokerProcess) -> Cli:
    return Cli(broker.address)


def wait_for(condition: Any, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(POLL_S)


def iso_utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_topic_create_list_and_describe(cli: Cli, topic_name: str) -> None:
    # When a topic is created with settings
    out = cli.ok("topic", "create", topic_name, "--lease", "45s", "--max-deliveries", "5")
    assert out.strip() == f"created topic {topic_name}"
    # Then it is listed, as text and as JSON lines (broker from DEJAQ_BROKER)
    assert topic_name in cli.ok("topic", "list", via_env=True).split()
    listed = {t["name"]: t for t in map(json.loads, cli.ok("topic", "list", "--json").splitlines())}
    assert listed[topic_name]["lease_ms"] == 45_000
    assert listed[topic_name]["max_deliveries"] == 5
    # and described with its settings and counts
    info = cli.json("topic", "describe", topic_name, "--json", via_env=True)
    assert info["name"] == topic_name
    assert info["settings"]["lease_ms"] == 45_000
    assert info["counts"] == {"waiting": 0, "due": 0, "leased": 0, "dead": 0}
    assert info["consumers"] == 0
    text = cli.ok("topic", "describe", topic_name)
    assert "max_deliveries=5" in text and "waiting=0" in text
    # and with the default dedup window
    assert info["settings"]["dedup_window_ms"] == 24 * 3600 * 1000
    # and a second create fails readably
    assert "already exists" in cli.fails("topic", "create", topic_name)


def test_topic_dedup_window_keeps_an_acked_id_taken(cli: Cli, topic_name: str) -> None:
    # Given topics with a 2 h dedup window and with none
    cli.ok("topic", "create", topic_name, "--dedup-window", "2h")
    cli.ok("topic", "create", f"{topic_name}-off", "--dedup-window", "0")
    windows = {
        name: cli.json("topic", "describe", name, "--json")["settings"]["dedup_window_ms"]
        for name in (topic_name, f"{topic_name}-off")
    }
    assert windows == {topic_name: 7_200_000, f"{topic_name}-off": 0}
    # When a message of each is delivered and acked
    for name in windows:
        assert cli.ok("produce", name, "x", "--id", "m1", "--in", "0s") == "accepted m1\n"
        cli.ok("consume", name, "--count", "1")
    # Then producing it again is a duplicate where the window keeps it, not elsewhere
    assert cli.ok("produce", topic_name, "x", "--id", "m1", "--in", "0s") == "duplicate m1\n"
    off = cli.ok("produce", f"{topic_name}-off", "x", "--id", "m1", "--in", "0s")
    assert off == "accepted m1\n"
    # and a bad window is refused readably
    assert "duration" in cli.fails("topic", "create", f"{topic_name}-2", "--dedup-window", "long")


def test_produce_with_in_and_at_then_consume_acks_everything(cli: Cli, topic_name: str) -> None:
    # Given a topic and two messages, due in 300 ms and at an ISO 8601 time 500 ms away
    cli.ok("topic", "create", topic_name)
    assert cli.ok("produce", topic_name, "first", "--id", "m1", "--in", "300ms") == "accepted m1\n"
    at = now_ms() + 500
    out = cli.ok("produce", topic_name, "second", "--id", "m2", "--at", iso_utc(at))
    assert out == "accepted m2\n"
    # and one produced again under the same id
    assert cli.ok("produce", topic_name, "again", "--id", "m1", "--in", "1s") == "duplicate m1\n"
    # When a consumer takes two
    got = cli.lines("consume", topic_name, "--count", "2")
    # Then it printed one JSON line per delivery, in time order, none early
    assert [(d["id"], d["payload"], d["deliveries"]) for d in got] == [
        ("m1", "first", 1),
        ("m2", "second", 1),
    ]
    assert set(got[0]) >= {"id", "timestamp_ms", "received_at_ms", "deliveries", "payload"}
    assert got[1]["timestamp_ms"] == at
    assert all(d["received_at_ms"] >= d["timestamp_ms"] for d in got)
    # and acked them: nothing is left
    info = cli.json("topic", "describe", topic_name, "--json")
    assert info["counts"] == {"waiting": 0, "due": 0, "leased": 0, "dead": 0}


def test_payload_after_the_options_as_users_type_it(cli: Cli, topic_name: str) -> None:
    # Given a topic
    cli.ok("topic", "create", topic_name, via_env=True)
    # When the payload comes after --in
    out = cli.ok("produce", topic_name, "--id", "late-payload", "--in", "1h", "hello world")
    # Then it is the payload
    assert out == "accepted late-payload\n"
    got = cli.json("get", topic_name, "late-payload")
    assert got["payload"] == "hello world"


def test_produce_jsonl_from_a_file_counts_duplicates(
    cli: Cli, topic_name: str, tmp_path: Path
) -> None:
    # Given a file of three messages, the third repeating the first id
    cli.ok("topic", "create", topic_name)
    at = now_ms() + 3_600_000
    path = tmp_path / "messages.jsonl"
    lines = [
        {"id": "a", "timestamp_ms": at, "payload": "x"},
        {"id": "b", "timestamp_ms": at + 1, "payload_base64": "/wD+"},
        {"id": "a", "timestamp_ms": at + 2, "payload": "y"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    # When it is produced
    out = cli.ok("produce", topic_name, "--jsonl", str(path))
    # Then two were accepted and one was a duplicate
    assert out.strip() == "accepted 2, duplicate 1, rejected 0"
    assert cli.json("get", topic_name, "a")["payload"] == "x"
    assert cli.json("get", topic_name, "b")["payload_base64"] == "/wD+"


def test_produce_jsonl_from_stdin_with_rejected_lines_fails(cli: Cli, topic_name: str) -> None:
    # Given lines on stdin: one good, one not JSON, one without a time, one at a negative time
    cli.ok("topic", "create", topic_name)
    at = now_ms() + 3_600_000
    stdin = "\n".join(
        [
            json.dumps({"id": "good", "timestamp_ms": at, "payload": "x"}),
            "{not json",
            json.dumps({"id": "timeless", "payload": "x"}),
            json.dumps({"id": "negative", "timestamp_ms": -1, "payload": "x"}),
        ]
    )
    # When it is produced
    done = cli.run("produce", topic_name, "--jsonl", "-", stdin=stdin)
    # Then the good one was accepted, the others rejected, and the exit code says so
    assert done.returncode != 0
    assert done.stdout.strip() == "accepted 1, duplicate 0, rejected 3"
    assert "Traceback" not in done.stderr
    for lineno in (2, 3, 4):
        assert f"line {lineno}:" in done.stderr
    assert (
        "line 2: not valid JSON: Expecting property name enclosed in double quotes at column 2\n"
        in done.stderr
    )
    assert cli.json("get", topic_name, "good")["state"] == "waiting"
    info = cli.json("topic", "describe", topic_name, "--json")
    assert info["counts"]["waiting"] == 1


def test_produce_jsonl_of_seconds_and_misspelt_fields_refuses_those_lines(
    cli: Cli, topic_name: str
) -> None:
    # Given lines due in epoch seconds, with a misspelt field, long past, and at 0
    cli.ok("topic", "create", topic_name)
    lines = [
        {"id": "seconds", "timestamp_ms": now_ms() // 1000},
        {"id": "misspelt", "timestamp_ms": now_ms(), "payload64": "AP8="},
        {"id": "past", "timestamp_ms": now_ms() - 3_600_000},
        {"id": "zero", "timestamp_ms": 0, "payload_base64": "AP8="},
    ]
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    # When they are produced
    done = cli.run("produce", topic_name, "--jsonl", "-", stdin=stdin)
    # Then the seconds and the misspelt field are refused by line, nothing dropped silently
    assert done.stdout.strip() == "accepted 2, duplicate 0, rejected 2"
    assert "line 1: rejected: timestamp " in done.stderr and "not seconds" in done.stderr
    assert "line 2: rejected: unknown field 'payload64'" in done.stderr
    # and the one long past is taken with one warning line; 0 means now, quietly
    assert done.stderr.count("dejaq: warning: ") == 1
    assert "dejaq: warning: 1 line due more than a minute in the past" in done.stderr
    assert cli.json("get", topic_name, "zero")["payload_base64"] == "AP8="


def test_produce_jsonl_schedules_each_line_of_a_pipe_as_it_comes(cli: Cli, topic_name: str) -> None:
    # Given a producer reading JSON lines from a pipe that stays open
    cli.ok("topic", "create", topic_name)
    at = now_ms() + 3_600_000
    env = {k: v for k, v in os.environ.items() if k != "DEJAQ_BROKER"}
    argv = [*DEJAQ, "produce", topic_name, "--jsonl", "-", "--broker", cli.address]
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as producer:
        assert producer.stdin is not None
        try:
            for i in range(3):
                # When one line comes, and nothing after it for now
                line = {"id": f"live-{i}", "timestamp_ms": at + i, "payload": "x"}
                producer.stdin.write(json.dumps(line) + "\n")
                producer.stdin.flush()
                # Then it is on the timeline while the pipe is still open
                wait_for(
                    lambda i=i: cli.run("get", topic_name, f"live-{i}").returncode == 0,
                    f"live-{i} scheduled before the input ends",
                )
            # When a bad line comes last and the input ends
            out, err = producer.communicate("{not json\n", timeout=TIMEOUT_S)
        finally:
            producer.kill()
    # Then it is reported by its line, and the totals are printed
    assert producer.returncode == 1 and "Traceback" not in err, err
    assert out.strip() == "accepted 3, duplicate 0, rejected 1"
    assert err.startswith("line 4: not valid JSON"), err


def test_get_move_and_cancel_by_id(cli: Cli, topic_name: str) -> None:
    # Given a message due on 2030-01-01 09:00 UTC
    cli.ok("topic", "create", topic_name)
    cli.ok("produce", topic_name, "new year", "--id", "ny", "--at", "2030-01-01T09:00:00Z")
    got = cli.json("get", topic_name, "ny")
    assert (got["timestamp_ms"], got["state"], got["version"]) == (1_893_488_400_000, "waiting", 1)
    assert got["payload"] == "new year" and got["lease_owner"] is None
    # (the same instant with an offset, and without a zone: UTC)
    cli.ok("produce", topic_name, "x", "--id", "ny-cet", "--at", "2030-01-01T10:00:00+01:00")
    cli.ok("produce", topic_name, "x", "--id", "ny-naive", "--at", "2030-01-01T09:00:00")
    for other in ("ny-cet", "ny-naive"):
        assert cli.json("get", topic_name, other)["timestamp_ms"] == 1_893_488_400_000
    # When it is moved an hour from now
    before = now_ms()
    out = cli.ok("move", topic_name, "ny", "--in", "1h")
    # Then it is due then, at a new version
    assert out.startswith("moved ny to ") and out.strip().endswith("(version 2)")
    moved = cli.json("get", topic_name, "ny")
    assert moved["version"] == 2
    assert before + 3_600_000 <= moved["timestamp_ms"] <= now_ms() + 3_600_000
    # When a move quotes the old version, it is refused and nothing changes
    assert "version" in cli.fails("move", topic_name, "ny", "--in", "2h", "--version", "1")
    assert cli.json("get", topic_name, "ny") == moved
    # When it is cancelled, it is gone
    assert cli.ok("cancel", topic_name, "ny") == "cancelled ny\n"
    assert "not found" in cli.fails("get", topic_name, "ny")


def test_produce_on_duplicate_replaces_or_extends_the_waiting_message(
    cli: Cli, topic_name: str
) -> None:
    # Given a message waiting for 2030
    cli.ok("topic", "create", topic_name)
    cli.ok("produce", topic_name, "v1", "--id", "digest", "--at", "2030-01-01T09:00:00Z")
    # When it is produced again replacing, then from JSON lines extending
    out = cli.ok(
        "produce", topic_name, "v2", "--id", "digest", "--in", "1h", "--on-duplicate", "replace"
    )
    assert out == "replaced digest\n"
    line = '{"id": "digest", "timestamp_ms": 1900000000000, "payload": "v3"}\n'
    summary = cli.ok("produce", topic_name, "--jsonl", "-", "--on-duplicate", "extend", stdin=line)
    # Then it holds the replacing payload at the extended time, at its third version
    assert summary == "accepted 0, duplicate 0, rejected 0, extended 1\n"
    got = cli.json("get", topic_name, "digest")
    assert (got["payload"], got["timestamp_ms"], got["version"]) == ("v2", 1_900_000_000_000, 3)
    # And a mode there is not is one line, nothing sent
    error = cli.fails(
        "produce", topic_name, "v4", "--id", "digest", "--in", "1h", "--on-duplicate", "merge"
    )
    assert "on_duplicate must be one of keep, replace, extend" in error


def test_dead_list_and_redrive(cli: Cli, topic_name: str) -> None:
    # Given a topic whose messages expire 1 s after they are due, and a message a minute overdue
    cli.ok("topic", "create", topic_name, "--expiry", "1s")
    cli.ok("produce", topic_name, "stale", "--id", "old", "--at", str(now_ms() - 60_000))
    # When a consumer comes by, the message is dead-lettered instead of delivered
    assert cli.ok("consume", topic_name, "--idle", "300ms") == ""

    def dead() -> list[Any]:
        return cli.lines("dead", "list", topic_name)

    wait_for(lambda: dead() != [], "the dead message")
    (entry,) = dead()
    assert (entry["id"], entry["payload"], entry["deliveries"]) == ("old", "stale", 0)
    # When it is redriven
    assert cli.ok("dead", "redrive", topic_name) == "redriven 1\n"
    # Then it is delivered
    (got,) = cli.lines("consume", topic_name, "--count", "1")
    assert (got["id"], got["payload"]) == ("old", "stale")
    assert dead() == []


def test_errors_are_one_readable_line(cli: Cli, topic_name: str) -> None:
    cli.ok("topic", "create", topic_name)
    # An unknown topic
    assert "no-such-topic" in cli.fails("topic", "describe", "no-such-topic")
    assert "no-such-topic" in cli.fails("produce", "no-such-topic", "x", "--in", "1s")
    assert "no-such-topic" in cli.fails("consume", "no-such-topic", "--count", "1")
    # A bad duration or time
    assert "duration" in cli.fails("produce", topic_name, "x", "--in", "soon")
    assert "ISO 8601" in cli.fails("produce", topic_name, "x", "--at", "tomorrow-ish")
    assert "duration" in cli.fails("topic", "create", f"{topic_name}-2", "--lease", "forever")
    # A duration without its unit, the payload after it unquoted
    no_unit = "--in: '3' has no unit: a duration is like 250ms, 30s, 5m, 2h, 7d"
    assert cli.fails("produce", topic_name, "--in", "3", "seconds") == f"dejaq: error: {no_unit}"
    assert cli.fails("produce", topic_name, "--in", "3", "seconds", "x").endswith(no_unit)
    # A file of lines that is not there, or is a folder
    missing = "/nonexistent/lines.jsonl"
    assert cli.fails("produce", topic_name, "--jsonl", missing) == (
        f"dejaq: error: cannot read {missing}: No such file or directory"
    )
    assert cli.fails("produce", topic_name, "--jsonl", "/").endswith(
        "cannot read /: Is a directory"
    )
    # A broker that is not there
    done = subprocess.run(
        [*DEJAQ, "topic", "list", "--broker", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("dejaq: error: ") and "Traceback" not in done.stderr
    # and none of this produced anything
    info = cli.json("topic", "describe", topic_name, "--json")
    assert info["counts"] == {"waiting": 0, "due": 0, "leased": 0, "dead": 0}


HUGE = "99999999999999999999"  # past any 64-bit field
OUT_OF_RANGE_INPUTS = [
    ("--buckets", ("topic", "create", "{new}", "--buckets", "-1")),
    ("--buckets", ("topic", "create", "{new}", "--buckets", HUGE)),
    ("--max-deliveries", ("topic", "create", "{new}", "--max-deliveries", "-1")),
    ("--max-payload", ("topic", "create", "{new}", "--max-payload", HUGE)),
    ("--lease", ("topic", "create", "{new}", "--lease", f"{HUGE}d")),
    ("--dedup-window", ("topic", "create", "{new}", "--dedup-window", f"{HUGE}d")),
    ("--priorities", ("topic", "create", "{new}", "--kind", "priority", "--priorities", HUGE)),
    ("--aging-ms", ("topic", "create", "{new}", "--kind", "priority", "--aging-ms", HUGE)),
    (
        "--deliver-concurrency",
        (
            "topic",
            "create",
            "{new}",
            "--deliver-to",
            "https://example.com/h",
            "--deliver-concurrency",
            "-1",
        ),
    ),
    ("webhook URL", ("topic", "create", "{new}", "--deliver-to", "http://[::1/h")),
    ("webhook URL", ("topic", "create", "{new}", "--deliver-to", "http://a b.example/h")),
    ("--max-deliveries", ("topic", "set", "{topic}", "--max-deliveries", HUGE)),
    ("--lease", ("topic", "set", "{topic}", "--lease", f"{HUGE}d")),
    ("--step", ("topic", "forecast", "{topic}", "--step", f"{HUGE}d")),
    ("--credits", ("consume", "{topic}", "--credits", HUGE)),
    ("--hold", ("consume", "{topic}", "--hold", f"{HUGE}d")),
    ("--version", ("move", "{topic}", "m", "--in", "1s", "--version", "-1")),
    ("--version", ("cancel", "{topic}", "m", "--version", HUGE)),
    ("--in", ("dead", "redrive", "{topic}", "--in", f"{HUGE}d")),
    ("1970-01-01 .. 9999-12-31", ("dead", "redrive", "{topic}", "--at", HUGE)),
    ("--limit", ("dead", "list", "{topic}", "--limit", HUGE)),
    (
        "1970-01-01 .. 9999-12-31",
        ("cron", "add", "{topic}", "e", "--schedule", "* * * * *", "--start", HUGE, "x"),
    ),
    (
        "--misfire-limit",
        (
            "cron",
            "add",
            "{topic}",
            "e",
            "--schedule",
            "* * * * *",
            "--misfire",
            "all",
            "--misfire-limit",
            "-1",
            "x",
        ),
    ),
    ("--next", ("cron", "show", "{topic}", "e", "--next", HUGE)),
    ("not UTF-8", ("produce", "{topic}", "--id", "\udcff", "x", "--in", "1s")),
    ("not UTF-8", ("get", "{topic}", "\udcff")),
    ("token", ("topic", "list", "--token", "two\nlines")),
]


@pytest.mark.parametrize(
    ("named", "command"),
    OUT_OF_RANGE_INPUTS,
    ids=[f"{c[0]} {named}" for named, c in OUT_OF_RANGE_INPUTS],
)
def test_values_out_of_range_or_not_text_are_one_line_and_change_nothing(
    cli: Cli, topic_name: str, named: str, command: tuple[str, ...]
) -> None:
    # Given a topic, and a command whose input no wire field can carry
    cli.ok("topic", "create", topic_name)
    argv = [a.format(topic=topic_name, new=f"{topic_name}-new") for a in command]
    # The refusal is one line that names the flag or the value's problem
    assert named in cli.fails(*argv)
    # and nothing was created, scheduled or moved
    assert f"{topic_name}-new" not in [t["name"] for t in cli.lines("topic", "list", "--json")]
    info = cli.json("topic", "describe", topic_name, "--json")
    assert info["counts"] == {"waiting": 0, "due": 0, "leased": 0, "dead": 0}


def test_bad_environment_values_are_one_line(cli: Cli) -> None:
    for name, value, named in [
        ("DEJAQ_BROKER", "\udcff", "DEJAQ_BROKER is not UTF-8"),
        ("DEJAQ_TOKEN", "\udcff", "DEJAQ_TOKEN is not UTF-8"),
        ("DEJAQ_TOKEN", "two\nlines", "token"),
    ]:
        env = {**os.environ, name: value}
        done = subprocess.run(
            [*DEJAQ, "topic", "list", "--broker", cli.address],
            capture_output=True,
            text=True,
            errors="replace",
            env=env,
            timeout=TIMEOUT_S,
        )
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("dejaq: error: ") and done.stderr.count("\n") == 1
        assert named in done.stderr


@pytest.mark.parametrize(
    "command",
    [("produce", "t", "--in", "1s", "x"), ("consume", "t", "--count", "1"), ("topic", "list")],
    ids=["produce", "consume", "topic-list"],
)
def test_a_broker_that_is_not_running_is_named_with_the_refusal(
    refused_address: str, command: tuple[str, ...]
) -> None:
    # Given no broker at the address given: each command fails at once (well
    # within the run's timeout), naming the address and why it failed
    error = Cli(refused_address).fails(*command)
    assert refused_address in error and "Connection refused" in error


def test_a_rate_capped_topic_drains_a_burst_at_its_cap(cli: Cli, topic_name: str) -> None:
    # Given a topic capped at 50 deliveries a second, and 40 messages due at one ms
    out = cli.ok("topic", "create", topic_name, "--max-rate", "50/s")
    assert out.strip() == f"created topic {topic_name}"
    at = now_ms() + 300
    lines = [{"id": f"m{i}", "timestamp_ms": at, "payload": "x"} for i in range(40)]
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    assert cli.ok("produce", topic_name, "--jsonl", "-", stdin=stdin).startswith("accepted 40")
    # When a consumer takes them all
    got = cli.lines("consume", topic_name, "--count", "40")
    # Then none was early, and they came at about the cap, not at once
    received = sorted(d["received_at_ms"] for d in got)
    assert received[0] >= at
    assert received[-1] - received[0] >= 600  # 40 at 50/s: ~0.8 s
    # And the cap shows in the settings, can be changed while running, and lifted
    info = cli.json("topic", "describe", topic_name, "--json")
    assert info["settings"]["max_rate"] == 50.0
    assert cli.ok("topic", "set", topic_name, "--max-rate", "300/m").strip() == (
        f"topic {topic_name}: max rate 5/s"
    )
    assert cli.ok("topic", "set", topic_name, "--max-rate", "none").strip() == (
        f"topic {topic_name}: max rate none"
    )
    assert cli.json("topic", "describe", topic_name, "--json")["settings"]["max_rate"] == 0


@pytest.mark.parametrize("rate", ["0/s", "-3", "fast", "5/week"])
def test_a_bad_max_rate_is_refused_readably(cli: Cli, topic_name: str, rate: str) -> None:
    assert "rate" in cli.fails("topic", "create", topic_name, "--max-rate", rate)
    assert topic_name not in cli.ok("topic", "list").split()
    cli.ok("topic", "create", topic_name)
    assert "rate" in cli.fails("topic", "set", topic_name, "--max-rate", rate)
    assert cli.json("topic", "describe", topic_name, "--json")["settings"]["max_rate"] == 0


def test_the_lease_and_max_deliveries_of_a_running_topic_are_set(cli: Cli, topic_name: str) -> None:
    cli.ok("topic", "create", topic_name, "--lease", "30s")
    assert cli.ok(
        "topic", "set", topic_name, "--lease", "45s", "--max-deliveries", "3"
    ).strip() == (f"topic {topic_name}: lease 45000 ms, max deliveries 3")
    settings = cli.json("topic", "describe", topic_name, "--json")["settings"]
    assert (settings["lease_ms"], settings["max_deliveries"]) == (45_000, 3)
    assert "lease" in cli.fails("topic", "set", topic_name, "--lease", "1ms")
    assert "--max-deliveries: '-1' is out of range" in cli.fails(
        "topic", "set", topic_name, "--max-deliveries", "-1"
    )
    assert cli.json("topic", "describe", topic_name, "--json")["settings"]["lease_ms"] == 45_000


def test_a_topic_is_paused_and_resumed(cli: Cli, topic_name: str) -> None:
    # Given a paused topic
    cli.ok("topic", "create", topic_name)
    assert cli.ok("topic", "pause", topic_name).startswith(f"topic {topic_name}: paused since ")
    # When a message falls due, a consumer gets nothing while it is paused
    assert cli.ok("produce", topic_name, "x", "--id", "m1", "--in", "0s") == "accepted m1\n"
    assert cli.ok("consume", topic_name, "--idle", "1s") == ""
    # and describe and list say so
    info = cli.json("topic", "describe", topic_name, "--json")
    assert (info["settings"]["paused"], info["counts"]["due"]) == (True, 1)
    assert "state      paused since " in cli.ok("topic", "describe", topic_name)
    [line] = [x for x in cli.ok("topic", "list").splitlines() if x.split()[0] == topic_name]
    assert line.split()[1:] == ["timeline", "paused"]
    # When it is resumed, the message is delivered
    assert cli.ok("topic", "resume", topic_name).strip() == f"topic {topic_name}: running"
    assert [d["id"] for d in cli.lines("consume", topic_name, "--count", "1")] == ["m1"]
    assert "state      running" in cli.ok("topic", "describe", topic_name)
    # And pausing an unknown topic fails readably
    assert "does not exist" in cli.fails("topic", "pause", "no-such-topic")


def test_setting_the_rate_of_an_unknown_topic_fails_readably(cli: Cli) -> None:
    assert "does not exist" in cli.fails("topic", "set", "no-such-topic", "--max-rate", "none")


def test_cron_entries_through_the_cli(cli: Cli, topic_name: str) -> None:
    # Given a topic and an entry firing every second
    cli.ok("topic", "create", topic_name)
    out = cli.ok("cron", "add", topic_name, "tick", "--schedule", "* * * * * *", "hello")
    assert out.startswith("added tick: next ")
    cli.ok(
        "cron",
        "add",
        topic_name,
        "daily",
        "--schedule",
        "30 3 * * *",
        "--tz",
        "Europe/Bucharest",
        "--misfire",
        "skip",
        "report",
    )
    # Then its occurrences arrive as messages ENTRY@MS, at their ms, none early
    got = cli.lines("consume", topic_name, "--count", "3")
    assert all(d["id"] == f"tick@{d['timestamp_ms']}" for d in got)
    assert all(d["received_at_ms"] >= d["timestamp_ms"] for d in got)
    assert {d["payload"] for d in got} == {"hello"}
    # and the entries are listed, and shown with their next occurrences
    listed = [
        json.loads(line) for line in cli.ok("cron", "list", topic_name, "--json").splitlines()
    ]
    assert [(e["id"], e["state"]) for e in listed] == [("daily", "active"), ("tick", "active")]
    shown = cli.json("cron", "show", topic_name, "daily", "--next", "3", "--json")
    assert shown["timezone"] == "Europe/Bucharest" and len(shown["upcoming"]) == 3
    assert "next " in cli.ok("cron", "show", topic_name, "daily")
    # When paused, updated, resumed and deleted
    assert cli.ok("cron", "pause", topic_name, "tick").strip() == "paused tick"
    assert "paused" in cli.ok("cron", "show", topic_name, "tick")
    assert cli.ok("cron", "update", topic_name, "tick", "--payload", "bye").startswith("updated")
    assert cli.ok("cron", "resume", topic_name, "tick").startswith("resumed tick: next ")
    assert cli.ok("cron", "delete", topic_name, "tick").strip() == "deleted tick"
    assert [
        e["id"] for e in map(json.loads, cli.ok("cron", "list", topic_name, "--json").splitlines())
    ] == ["daily"]
    # the companion timeline is not a topic users see
    assert cli.ok("topic", "list").split().count(topic_name) == 1
    assert not [t for t in cli.ok("topic", "list").split() if "~" in t]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--schedule", "61 * * * *"), "field 1 (minute, '61' at position 1)"),
        (("--schedule", "* * * * *", "--tz", "Mars/Base"), "unknown time zone 'Mars/Base'"),
        (("--schedule", "* * *"), "3 fields"),
    ],
)
def test_bad_cron_entries_are_refused_readably(
    cli: Cli, topic_name: str, args: tuple[str, ...], message: str
) -> None:
    cli.ok("topic", "create", topic_name)
    assert message in cli.fails("cron", "add", topic_name, "e", *args, "x")
    assert cli.ok("cron", "list", topic_name) == ""
    assert "not found" in cli.fails("cron", "show", topic_name, "e")


def test_produce_at_epoch_seconds_is_refused_in_one_line(cli: Cli, topic_name: str) -> None:
    # Given a topic, and a time typed as $(date +%s): epoch seconds
    cli.ok("topic", "create", topic_name)
    seconds = str(now_ms() // 1000)
    # When it is given to --at, then it is refused, naming the likely mistake
    error = cli.fails("produce", topic_name, "--at", seconds, "--id", "s", "x")
    assert "epoch seconds?" in error and f"({int(seconds) * 1000})" in error
    assert cli.run("get", topic_name, "s").returncode == 1  # nothing stored


def test_produce_at_a_time_long_past_warns_once_and_is_due_now(cli: Cli, topic_name: str) -> None:
    # Given a topic
    cli.ok("topic", "create", topic_name)
    # When a message is produced at a time an hour past
    done = cli.run("produce", topic_name, "--at", str(now_ms() - 3_600_000), "--id", "p", "x")
    # Then it is accepted, with one warning line saying it is due now
    assert done.returncode == 0 and done.stdout.strip() == "accepted p"
    assert done.stderr.startswith("dejaq: warning: --at ") and done.stderr.count("\n") == 1
    assert "1 h in the past: due now" in done.stderr
    # and a time a few seconds past is taken without a word
    quiet = cli.run("produce", topic_name, "--at", str(now_ms() - 5_000), "--id", "q", "x")
    assert quiet.returncode == 0 and quiet.stderr == ""
