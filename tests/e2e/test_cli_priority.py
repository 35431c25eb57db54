"""The ``dejaq`` command line on priority topics, a process per command against
a broker on memory, as users run it."""

from __future__ import annotations

import json

import pytest

from tests.e2e.broker_process import Brokers
from tests.e2e.test_cli import Cli


@pytest.fixture
def cli(brokers: Brokers) -> Cli:
    return Cli(brokers.get("memory").address)


def test_a_priority_topic_is_created_shown_and_listed_with_its_kind(
    cli: Cli, topic_name: str
) -> None:
    # When a priority topic is created with its settings
    out = cli.ok(
        "topic", "create", topic_name, "--kind", "priority", "--priorities", "10", "--aging", "5s"
    )
    # Then create, list, show and describe --json all say its kind and settings
    kind = "priority (priorities=10, aging=5000ms)"
    assert out == f"created topic {topic_name} ({kind})\n"
    listed = [line.split(None, 1) for line in cli.ok("topic", "list").splitlines()]
    assert [topic_name, kind] in listed
    shown = cli.ok("topic", "show", topic_name)
    assert f"kind       {kind}\n" in shown and "priorities=" not in shown.split("kind")[0]
    settings = cli.json("topic", "describe", topic_name, "--json")["settings"]
    assert (settings["kind"], settings["priorities"]) == ("priority", 10)
    assert settings["aging_ms"] == 5000
    lines = [json.loads(line) for line in cli.ok("topic", "list", "--json").splitlines()]
    assert {"name": topic_name, "kind": "priority"}.items() <= next(
        t for t in lines if t["name"] == topic_name
    ).items()
    # and a priority topic without --priorities has 100, --aging-ms takes milliseconds
    cli.ok("topic", "create", f"{topic_name}-d", "--kind", "priority", "--aging-ms", "250")
    settings = cli.json("topic", "describe", f"{topic_name}-d", "--json")["settings"]
    assert (settings["priorities"], settings["aging_ms"]) == (100, 250)
    # while a timeline lists as one
    cli.ok("topic", "create", f"{topic_name}-t")
    assert [f"{topic_name}-t", "timeline"] in [
        line.split(None, 1) for line in cli.ok("topic", "list").splitlines()
    ]


def test_the_most_urgent_is_consumed_first_with_its_priority(cli: Cli, topic_name: str) -> None:
    # Given a priority topic holding messages of three priorities, and one not before an hour
    cli.ok("topic", "create", topic_name, "--kind", "priority", "--priorities", "10")
    for mid, priority in (("low", "5"), ("urgent", "0"), ("lowest", "9"), ("also-low", "5")):
        assert cli.ok("produce", topic_name, "--id", mid, "--priority", priority, "x") == (
            f"accepted {mid}\n"
        )
    later = ("produce", topic_name, "--id", "later", "--priority", "0", "--in", "1h", "later")
    assert cli.ok(*later) == "accepted later\n"
    # When they are consumed
    got = cli.lines("consume", topic_name, "--count", "4")
    # Then the most urgent came first, FIFO within a priority, each line with its priority
    assert [(d["id"], d["priority"]) for d in got] == [
        ("urgent", 0),
        ("low", 5),
        ("also-low", 5),
        ("lowest", 9),
    ]
    # and the not-before one waits, shown with its priority and time
    waiting = cli.json("get", topic_name, "later")
    assert (waiting["state"], waiting["priority"]) == ("waiting", 0)
    assert waiting["timestamp_ms"] > got[-1]["received_at_ms"] + 3_000_000


def test_jsonl_lines_take_a_priority(cli: Cli, topic_name: str) -> None:
    cli.ok("topic", "create", topic_name, "--kind", "priority", "--priorities", "3")
    lines = [
        {"id": "b", "priority": 2, "payload": "x"},
        {"id": "a", "priority": 0, "payload": "y"},
        {"id": "c", "priority": 7, "payload": "z"},
        {"id": "d", "priority": -1, "payload": "z"},
    ]
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    done = cli.run("produce", topic_name, "--jsonl", "-", stdin=stdin)
    assert done.returncode == 1 and done.stdout == "accepted 2, duplicate 0, rejected 2\n"
    assert "line 3: priority 7 is out of range" in done.stderr
    assert "line 4: rejected: priority -1 must be" in done.stderr
    assert [d["id"] for d in cli.lines("consume", topic_name, "--count", "2")] == ["a", "b"]


def test_move_gives_a_message_another_priority(cli: Cli, topic_name: str) -> None:
    # Given two messages at priority 5, the second one not before an hour
    cli.ok("topic", "create", topic_name, "--kind", "priority", "--priorities", "10")
    cli.ok("produce", topic_name, "--id", "first", "--priority", "5", "x")
    cli.ok("produce", topic_name, "--id", "second", "--priority", "5", "x")
    cli.ok("produce", topic_name, "--id", "later", "--priority", "5", "--in", "1h", "x")
    # When the second one is moved to priority 0, and the later one to priority 1
    out = cli.ok("move", topic_name, "second", "--priority", "0")
    assert out.startswith("moved second to priority 0, available ") and "(version 2)" in out
    not_before = cli.json("get", topic_name, "later")["timestamp_ms"]
    cli.ok("move", topic_name, "later", "--priority", "1")
    # Then the moved one comes first, and the later one kept its not-before time
    assert [d["id"] for d in cli.lines("consume", topic_name, "--count", "2")] == [
        "second",
        "first",
    ]
    later = cli.json("get", topic_name, "later")
    assert (later["priority"], later["timestamp_ms"], later["state"]) == (1, not_before, "waiting")
    # and a not-before time and a priority move together
    cli.ok("move", topic_name, "later", "--priority", "3", "--in", "0s")
    assert cli.json("get", topic_name, "later")["priority"] == 3


def test_cron_entries_carry_a_priority(cli: Cli, topic_name: str) -> None:
    # Given a priority topic, and two entries every second: a lax one, then an urgent one
    cli.ok("topic", "create", topic_name, "--kind", "priority", "--priorities", "10")
    every_second = ("--schedule", "* * * * * *")
    cli.ok("cron", "add", topic_name, "lax", *every_second, "--priority", "9", "lax")
    cli.ok("cron", "add", topic_name, "urgent", *every_second, "urgent")  # 0, the default
    # Then list and show print their priorities
    listed = cli.lines("cron", "list", topic_name, "--json")
    assert [(e["id"], e["priority"]) for e in listed] == [("lax", 9), ("urgent", 0)]
    text = cli.ok("cron", "list", topic_name).splitlines()
    assert text[0].startswith("lax  * * * * * *  UTC  priority 9  next ")
    assert "\npriority   9\n" in cli.ok("cron", "show", topic_name, "lax")
    assert cli.json("cron", "show", topic_name, "urgent", "--json")["priority"] == 0
    # and their occurrences come with them: each second the urgent one first, none early
    got = cli.lines("consume", topic_name, "--count", "6")
    order = [d["id"] for d in got]
    for d in got:
        entry, at = d["id"].split("@")
        assert d["priority"] == {"lax": 9, "urgent": 0}[entry]
        assert d["received_at_ms"] >= int(at) and d["timestamp_ms"] >= int(at)
        if entry == "lax" and f"urgent@{at}" in order:
            assert order.index(f"urgent@{at}") < order.index(d["id"])
    # When the lax one is made urgent, from its next occurrence not yet produced
    assert cli.ok("cron", "update", topic_name, "lax", "--priority", "1").startswith("updated")
    assert "\npriority   1\n" in cli.ok("cron", "show", topic_name, "lax")
    for entry in ("lax", "urgent"):
        cli.ok("cron", "delete", topic_name, entry)


@pytest.mark.parametrize(
    ("kind", "args", "message"),
    [
        ("priority", ("--priority", "10"), "priority 10 is out of range for topic"),
        ("priority", ("--priority", "-1"), "--priority: '-1' is out of range"),
        ("timeline", ("--priority", "2"), "is a timeline: it takes no priority"),
    ],
)
def test_a_bad_cron_priority_is_refused_readably(
    cli: Cli, topic_name: str, kind: str, args: tuple[str, ...], message: str
) -> None:
    # Given an entry on a topic of each kind
    create = ("--kind", "priority", "--priorities", "10") if kind == "priority" else ()
    cli.ok("topic", "create", topic_name, *create)
    cli.ok("cron", "add", topic_name, "daily", "--schedule", "0 9 * * *", "x")
    before = cli.ok("cron", "list", topic_name, "--json")
    # When a bad priority is given to add or update, it is refused and changes nothing
    assert message in cli.fails(
        "cron", "add", topic_name, "e", "--schedule", "* * * * *", *args, "x"
    )
    assert message in cli.fails("cron", "update", topic_name, "daily", *args)
    assert cli.ok("cron", "list", topic_name, "--json") == before


def test_timelines_print_no_priority(cli: Cli, topic_name: str) -> None:
    cli.ok("topic", "create", topic_name)
    cli.ok("produce", topic_name, "--id", "m", "--in", "0s", "x")
    (got,) = cli.lines("consume", topic_name, "--count", "1")
    assert "priority" not in got
    cli.ok("produce", topic_name, "--id", "n", "--in", "1h", "x")
    assert "priority" not in cli.json("get", topic_name, "n")
    cli.ok("cron", "add", topic_name, "daily", "--schedule", "0 9 * * *", "x")
    (entry,) = cli.lines("cron", "list", topic_name, "--json")
    assert "priority" not in entry and "priority " not in cli.ok("cron", "list", topic_name)
    assert "\npriority " not in cli.ok("cron", "show", topic_name, "daily")


@pytest.mark.parametrize(
    ("create", "produce", "message"),
    [
        (("--kind", "urgent"), None, "unknown topic kind 'urgent': timeline or priority"),
        (("--priorities", "5"), None, "--priorities and --aging are for priority topics"),
        (("--kind", "priority", "--priorities", "5000"), None, "priorities must be between 1"),
        (("--kind", "priority", "--aging", "soon"), None, "'soon' is not a duration"),
        (("--kind", "priority", "--priorities", "10"), ("--priority", "10"), "out of range"),
        (("--kind", "priority", "--priorities", "10"), ("--priority", "-1"), "must be a whole"),
        ((), ("--priority", "3"), "is a timeline: it takes no priority"),
        ((), (), "give a PAYLOAD and --at or --in, or --priority on a priority topic"),
    ],
)
def test_bad_priority_input_is_refused_readably(
    cli: Cli,
    topic_name: str,
    create: tuple[str, ...],
    produce: tuple[str, ...] | None,
    message: str,
) -> None:
    if produce is None:
        assert message in cli.fails("topic", "create", topic_name, *create)
        assert topic_name not in cli.ok("topic", "list").split()
        return
    cli.ok("topic", "create", topic_name, *create)
    assert message in cli.fails("produce", topic_name, "--id", "m", *produce, "x")
    assert cli.json("topic", "describe", topic_name, "--json")["counts"]["waiting"] == 0
    assert cli.json("topic", "describe", topic_name, "--json")["counts"]["due"] == 0


def test_moving_a_timeline_message_to_a_priority_is_refused(cli: Cli, topic_name: str) -> None:
    cli.ok("topic", "create", topic_name)
    cli.ok("produce", topic_name, "--id", "m", "--in", "1h", "x")
    assert "timeline" in cli.fails("move", topic_name, "m", "--priority", "2")
    assert "--priority: '-2' is out of range" in cli.fails(
        "move", topic_name, "m", "--priority", "-2"
    )
    assert cli.json("get", topic_name, "m")["version"] == 1
