"""Limits per key through the ``dejaq`` command line against a broker (on
memory storage): a topic's limits set, a key's override set, shown, listed and removed,
the busiest keys listed, and bad input refused in one readable line."""

from __future__ import annotations

import pytest

from tests.e2e.broker_process import BrokerProcess, Brokers
from tests.e2e.support import now_ms
from tests.e2e.test_cli import Cli


@pytest.fixture
def cli(brokers: Brokers) -> Cli:
    broker: BrokerProcess = brokers.get("memory")
    return Cli(broker.address)


def test_a_topics_limits_per_key_are_set_and_stored(cli: Cli, topic_name: str) -> None:
    cli.ok("topic", "create", topic_name)
    out = cli.ok(
        "topic",
        "set",
        topic_name,
        "--key-concurrency",
        "5",
        "--key-rate",
        "100/s",
        "--key-burst",
        "10",
    )
    assert out.strip() == f"topic {topic_name}: per key concurrency 5, rate 100/s burst 10"
    settings = cli.json("topic", "describe", topic_name, "--json")["settings"]
    assert (settings["key_concurrency"], settings["key_rate"], settings["key_burst"]) == (
        5,
        100.0,
        10,
    )
    described = cli.ok("topic", "describe", topic_name).splitlines()
    assert "per key    concurrency 5, rate 100/s burst 10" in described
    lifted = cli.ok("topic", "set", topic_name, "--key-rate", "none")
    assert lifted.strip() == f"topic {topic_name}: per key concurrency 5, rate none"


def test_a_keys_override_is_set_shown_listed_and_removed(cli: Cli, topic_name: str) -> None:
    cli.ok("topic", "create", topic_name)
    cli.ok("topic", "set", topic_name, "--key-concurrency", "5")
    out = cli.ok("key", "set", topic_name, "acme", "--concurrency", "50", "--rate", "20/s")
    assert out.strip() == f"key 'acme' of topic {topic_name}: concurrency 50, rate 20/s"
    assert cli.ok("key", "show", topic_name, "bob").strip() == (
        f"key 'bob' of topic {topic_name}: concurrency 5, rate none (the topic's)"
    )
    shown = cli.json("key", "show", topic_name, "acme", "--json")
    assert shown["override"] == {"key": "acme", "concurrency": 50, "rate": 20.0}
    assert [line["key"] for line in cli.lines("key", "list", topic_name, "--json")] == ["acme"]
    removed = cli.ok("key", "remove", topic_name, "acme")
    assert removed.strip() == f"key 'acme' of topic {topic_name}: override removed"
    assert cli.ok("key", "list", topic_name) == ""
    assert "no override" in cli.fails("key", "remove", topic_name, "acme")


def test_the_busiest_keys_show_their_backlog_lateness_and_limits(cli: Cli, topic_name: str) -> None:
    # Given a key limited to 2 held, with 3 messages due a second ago, and another with 1
    cli.ok("topic", "create", topic_name)
    cli.ok("key", "set", topic_name, "acme", "--concurrency", "2")
    past = str(now_ms() - 1_000)
    for _ in range(3):
        cli.ok("produce", topic_name, "--key", "acme", "--at", past, "x")
    cli.ok("produce", topic_name, "--key", "bob", "--at", past, "y")
    # When the operator lists the busiest keys
    rows = cli.lines("topic", "keys", topic_name, "--json")
    # Then acme leads with its backlog, how late it runs and its limits
    assert [r["key"] for r in rows] == ["acme", "bob"]
    assert (rows[0]["due"], rows[0]["held"], rows[0]["concurrency"]) == (3, 0, 2)
    assert rows[0]["lateness_ms"] >= 1_000
    text = cli.ok("topic", "keys", topic_name).splitlines()
    assert text[0].split() == ["KEY", "DUE", "HELD", "LATE", "LIMITS"]
    assert text[1].startswith("acme") and "concurrency 2, rate none" in text[1]


def test_the_busiest_keys_of_a_quiet_topic_are_none(cli: Cli, topic_name: str) -> None:
    cli.ok("topic", "create", topic_name)
    assert cli.ok("topic", "keys", topic_name).strip() == (
        f"topic {topic_name}: no key has messages due or held"
    )
    assert cli.ok("topic", "keys", topic_name, "--json") == ""


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("topic", "set", "{t}", "--key-rate", "abc"), "--key-rate: 'abc' is not a rate"),
        (("topic", "set", "{t}", "--key-concurrency", "-1"), "--key-concurrency: '-1' is out"),
        (("key", "set", "{t}", "acme", "--rate=-5/s"), "--rate: '-5/s': a key's rate is above 0"),
        (("key", "set", "{t}", "acme"), "say what to set"),
        (("key", "set", "{t}", "", "--concurrency", "1"), "name a key"),
    ],
)
def test_bad_limits_are_refused_readably_and_change_nothing(
    cli: Cli, topic_name: str, args: tuple[str, ...], said: str
) -> None:
    cli.ok("topic", "create", topic_name)
    error = cli.fails(*(a.replace("{t}", topic_name) for a in args))
    assert said in error
    settings = cli.json("topic", "describe", topic_name, "--json")["settings"]
    assert (settings["key_concurrency"], settings["key_rate"]) == (0, 0.0)
    assert cli.ok("key", "list", topic_name) == ""
