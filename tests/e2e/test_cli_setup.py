"""Set-up that runs again, and payloads no shell argument holds: ``dejaq topic
create --exist-ok`` and ``dejaq produce --payload-file``, a process per command
against a broker on memory, as users run them."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.broker_process import Brokers
from tests.e2e.test_cli import DEJAQ, TIMEOUT_S, Cli

# Every byte value, a NUL and an invalid UTF-8 sequence among them: no argv holds it.
BINARY = bytes(range(256)) + b"\x00\xff\xfe"


@pytest.fixture
def cli(brokers: Brokers) -> Cli:
    return Cli(brokers.get("memory").address)


def test_create_with_exist_ok_succeeds_again_with_the_same_settings(
    cli: Cli, topic_name: str
) -> None:
    # Given a topic made by a set-up script
    made = cli.ok("topic", "create", topic_name, "--lease", "45s", "--exist-ok")
    assert made == f"created topic {topic_name}\n"
    created_at = cli.json("topic", "describe", topic_name, "--json")["created_at_ms"]
    # When the script runs again
    again = cli.ok("topic", "create", topic_name, "--lease", "45s", "--exist-ok")
    # Then it succeeds, saying the topic is there, and the topic is the same one
    assert again == f"topic {topic_name} exists with these settings\n"
    assert cli.json("topic", "describe", topic_name, "--json")["created_at_ms"] == created_at
    # and without --exist-ok a second create is still refused
    assert "already exists" in cli.fails("topic", "create", topic_name, "--lease", "45s")


def test_create_with_exist_ok_names_each_setting_that_differs_in_one_line(
    cli: Cli, topic_name: str
) -> None:
    # Given a topic with a 45 s lease and 8 buckets
    cli.ok("topic", "create", topic_name, "--lease", "45s", "--buckets", "8")
    # When a set-up asks for it with other settings
    error = cli.fails(
        "topic", "create", topic_name, "--lease", "30s", "--buckets", "8", "--max-deliveries", "3",
        "--exist-ok",
    )  # fmt: skip
    # Then it is refused in one line naming each difference, with both values
    assert error == (
        f"dejaq: error: topic '{topic_name}' exists with other settings:"
        " lease_ms 45000 (asked 30000), max_deliveries 0 (asked 3)"
    )
    # and nothing changed
    settings = cli.json("topic", "describe", topic_name, "--json")["settings"]
    assert (settings["lease_ms"], settings["max_deliveries"]) == (45_000, 0)


def test_a_payload_file_carries_any_bytes(cli: Cli, topic_name: str, tmp_path: Path) -> None:
    # Given a topic and a file of bytes that are not text
    cli.ok("topic", "create", topic_name)
    path = tmp_path / "payload.bin"
    path.write_bytes(BINARY)
    # When it is produced with --payload-file
    out = cli.ok("produce", topic_name, "--id", "bin", "--in", "1h", "--payload-file", str(path))
    # Then the message carries those very bytes
    assert out == "accepted bin\n"
    assert base64.b64decode(cli.json("get", topic_name, "bin")["payload_base64"]) == BINARY


def test_a_payload_from_stdin_carries_any_bytes(cli: Cli, topic_name: str) -> None:
    # Given a topic
    cli.ok("topic", "create", topic_name)
    # When bytes that are not text are piped to --payload-file -
    env = {k: v for k, v in os.environ.items() if k != "DEJAQ_BROKER"}
    done = subprocess.run(
        [*DEJAQ, "produce", topic_name, "--id", "piped", "--in", "1h", "--payload-file", "-",
         "--broker", cli.address],
        input=BINARY, capture_output=True, env=env, timeout=TIMEOUT_S,
    )  # fmt: skip
    # Then the message carries those very bytes
    assert (done.returncode, done.stdout, done.stderr) == (0, b"accepted piped\n", b"")
    assert base64.b64decode(cli.json("get", topic_name, "piped")["payload_base64"]) == BINARY


def test_a_payload_file_with_a_payload_too_or_unreadable_is_one_line(
    cli: Cli, topic_name: str, tmp_path: Path
) -> None:
    # Given a topic and a payload file
    cli.ok("topic", "create", topic_name)
    path = tmp_path / "payload.txt"
    path.write_text("from the file")
    # When a payload is given both ways, then it is refused in one line, nothing stored
    error = cli.fails("produce", topic_name, "--id", "two", "--in", "1h", "--payload-file",
                      str(path), "inline")  # fmt: skip
    assert error == "dejaq: error: give PAYLOAD or --payload-file, not both"
    assert "not found" in cli.fails("get", topic_name, "two")
    # and a file that is not there is named in one line
    missing = tmp_path / "missing.bin"
    error = cli.fails("produce", topic_name, "--in", "1h", "--payload-file", str(missing))
    assert error == f"dejaq: error: cannot read {missing}: No such file or directory"
    # and --jsonl takes no payload file
    assert "--payload-file" in cli.fails(
        "produce", topic_name, "--jsonl", "-", "--payload-file", str(path)
    )
