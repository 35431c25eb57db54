"""The image runs: built from nothing with podman (deploy/build-image.sh), three
containers of it on the host network form a cluster over a local etcd and
Redis. 10,000 messages produced through the CLI are all consumed, none early,
although the broker the consumer is attached to is stopped (`podman stop`) mid-run.
The broker runs as non-root on a read-only root, and SIGTERM ends it, exit 0,
within the grace period the chart gives it.

Run as docs/kubernetes.md shows (the image's own 0.0.0.0 listen address; host
network here, where `-p` has no network backend), it refuses to start until it is told
who may call it: DEJAQ_INSECURE_ALLOW_ANONYMOUS=true serves anyone, DEJAQ_AUTH
with a mounted principals file serves its token's holder and no one else."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest
import yaml

from tests.deploy import kubelet
from tests.deploy.chart import ANONYMOUS, render
from tests.deploy.podman import Container, build_image
from tests.etcd_server import EtcdServer
from tests.redis_server import RedisServer
from tests.servers import free_port

MESSAGES = 10_000
SPREAD_MS = 8_000  # due times spread over this long ...
DUE_IN_MS = 4_000  # ... starting this far ahead (time for the consumer to attach)
STOP_AT_MS = 3_000  # the consumer's broker is stopped this far into the spread
LEASE = "3s"  # what the stopped broker had leased comes back this soon
IDLE = "10s"  # the consumer ends after this long with nothing to deliver
BROKERS = 3
START_TIMEOUT_S = 30
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def image() -> str:
    return build_image()


@pytest.fixture
def brokers(
    image: str,
    redis: RedisServer,
    etcd_server: EtcdServer,
) -> Iterator[list[Container]]:
    run_id = uuid.uuid4().hex[:8]
    env = {
        "DEJAQ_STORAGE": redis.url,
        "DEJAQ_ETCD": etcd_server.url,
        "DEJAQ_CLUSTER": f"image-{run_id}",
        "DEJAQ_ETCD_TTL_S": "3",
        "DEJAQ_GRACE_S": "5",
    }
    containers = [
        Container(image, f"dejaq-test-{run_id}-{i}", {**env, "DEJAQ_LISTEN": f"127.0.0.1:{port}"})
        for i, port in enumerate(free_port() for _ in range(BROKERS))
    ]
    try:
        for c in containers:
            c.start()
        for c in containers:
            wait_serving(c)
        yield containers
    finally:
        for c in containers:
            c.remove()


def address(c: Container) -> str:
    return c.env["DEJAQ_LISTEN"]


def wait_serving(c: Container) -> None:
    port = int(address(c).rpartition(":")[2])
    deadline = time.monotonic() + START_TIMEOUT_S
    while not kubelet.grpc_probe({"grpc": {"port": port}, "timeoutSeconds": 1}):
        assert time.monotonic() < deadline, f"{c.name} did not serve:\n{c.logs()}"
        time.sleep(0.2)


def dejaq(
    *args: str, brokers: list[Container], feed: bool = False, stdout: IO[str] | None = None
) -> subprocess.Popen[str]:
    """``dejaq ARGS`` against ``brokers`` (tried in order), as a user runs it."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    env["DEJAQ_BROKER"] = ",".join(address(c) for c in brokers)
    pipe = subprocess.PIPE
    return subprocess.Popen(
        ["dejaq", *args], env=env, text=True, stdin=pipe if feed else None,
        stdout=stdout or pipe, stderr=pipe,
    )  # fmt: skip


def finish(process: subprocess.Popen[str], stdin: str | None = None, timeout: float = 60) -> str:
    out, err = process.communicate(stdin, timeout=timeout)
    assert process.returncode == 0, err
    return out or ""


def wait_attached(topic: str, brokers: list[Container]) -> str:
    """The address of the broker the topic's one consumer is attached to, once it is."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        status = json.loads(finish(dejaq("cluster", "status", "--json", brokers=brokers)))
        addresses = {b["id"]: b["address"] for b in status["brokers"]}
        consumers = [c for t in status["topics"] if t["name"] == topic for c in t["consumers"]]
        if consumers:
            return str(addresses.get(consumers[0]["broker"], consumers[0]["broker"]))
        assert time.monotonic() < deadline, f"no consumer attached: {status}"
        time.sleep(0.2)


@pytest.mark.timeout(900)
def test_three_containers_lose_nothing_when_one_stops(
    brokers: list[Container], tmp_path: Path
) -> None:
    first, second, third = brokers
    grace_s = render(ANONYMOUS).one("Deployment")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]

    # Given three brokers in containers, running as non-root
    assert all(c.exec("id", "-u") != "0" for c in brokers)
    assert first.exec("sh", "-c", "touch /opt/x 2>&1 || echo read-only").endswith("read-only")
    topic = f"image-{uuid.uuid4().hex[:8]}"
    finish(dejaq("topic", "create", topic, "--buckets", "16", "--lease", LEASE, brokers=brokers))

    # When a consumer attached to the first takes 10k messages produced through the third
    with (tmp_path / "consumed.jsonl").open("w") as output:
        consumer = dejaq("consume", topic, "--idle", IDLE, brokers=brokers, stdout=output)
        due = int(time.time() * 1000) + DUE_IN_MS
        lines = (
            json.dumps(
                {"id": f"m{i}", "timestamp_ms": due + i * SPREAD_MS // MESSAGES, "payload": "x"}
            )
            for i in range(MESSAGES)
        )
        producer = dejaq(
            "produce", topic, "--jsonl", "-", brokers=[third, second, first], feed=True
        )
        produced = finish(producer, stdin="\n".join(lines) + "\n")
        assert produced.startswith(f"accepted {MESSAGES},"), produced

        assert wait_attached(topic, brokers) == address(first)

        # ... and the first is stopped mid-run
        time.sleep(max(0.0, (due + STOP_AT_MS) / 1000 - time.time()))  # to a point in time
        took_s, exit_code = first.stop(grace_s)
        finish(consumer, timeout=SPREAD_MS / 1000 + 60)

    # Then SIGTERM ended it gracefully within the grace period
    assert exit_code == 0 and took_s < grace_s, (took_s, exit_code, first.logs())
    # ... and every message was delivered, none before its time
    deliveries = [
        json.loads(line) for line in (tmp_path / "consumed.jsonl").read_text().splitlines()
    ]
    assert {d["id"] for d in deliveries} == {f"m{i}" for i in range(MESSAGES)}
    early = [d for d in deliveries if d["received_at_ms"] < d["timestamp_ms"]]
    assert early == []
    # ... and the others stop as gracefully
    for c in (second, third):
        took_s, exit_code = c.stop(grace_s)
        assert exit_code == 0 and took_s < grace_s, (c.name, took_s, exit_code)


@pytest.fixture
def run_image(image: str) -> Iterator[Callable[..., Container]]:
    """Start a container of the image as ``podman run`` would; all removed at the end."""
    started: list[Container] = []

    def start(env: dict[str, str], files: dict[str, Path] | None = None) -> Container:
        name = f"dejaq-test-{uuid.uuid4().hex[:8]}"
        started.append(Container(image, name, env, files or {}).start())
        return started[-1]

    try:
        yield start
    finally:
        for c in started:
            c.remove()


def cli(port: int, *args: str, token: str = "") -> subprocess.CompletedProcess[str]:
    """``dejaq ARGS`` against 127.0.0.1:``port``, with ``token`` or no credentials."""
    env = {k: v for k, v in os.environ.items() if k != "DEJAQ_TOKEN"}
    env.update(PATH=f"{BIN}:{os.environ['PATH']}", DEJAQ_BROKER=f"127.0.0.1:{port}")
    if token:
        env["DEJAQ_TOKEN"] = token
    return subprocess.run(["dejaq", *args], env=env, capture_output=True, text=True, timeout=60)


def test_a_plain_run_serves_only_whom_it_is_told_to(
    run_image: Callable[..., Container], redis: RedisServer, tmp_path: Path
) -> None:
    storage = {"DEJAQ_STORAGE": redis.url}
    token = f"ops-{uuid.uuid4().hex}"
    ops = {
        "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
        "grants": [{"topics": "*", "allow": ["admin"]}],
    }
    auth = tmp_path / "auth.yaml"
    auth.write_text(yaml.safe_dump({"principals": {"ops": ops}}))
    auth.chmod(0o644)  # the broker's uid reads it

    # Given the image's own listen address (0.0.0.0:7700) and nothing about callers
    plain = run_image(storage)

    # Then it refuses to start, and says what to set
    assert plain.wait(START_TIMEOUT_S) != 0
    assert "refusing to serve 0.0.0.0:7700 without --auth" in plain.logs()

    # When it is told that anyone may do anything: it serves anyone
    port = free_port()
    anonymous = run_image(
        {**storage, "DEJAQ_LISTEN": f"0.0.0.0:{port}", "DEJAQ_INSECURE_ALLOW_ANONYMOUS": "true"}
    )
    wait_serving(anonymous)
    topic = f"plain-{uuid.uuid4().hex[:8]}"
    created = cli(port, "topic", "create", topic)
    assert created.returncode == 0, created.stderr

    # When it is given a principals file: it serves the token's holder, no one else
    port = free_port()
    secured = run_image(
        {**storage, "DEJAQ_LISTEN": f"0.0.0.0:{port}", "DEJAQ_AUTH": "/etc/dejaq/auth.yaml"},
        {"/etc/dejaq/auth.yaml": auth},
    )
    wait_serving(secured)
    listed = cli(port, "topic", "list", token=token)
    assert listed.returncode == 0 and topic in listed.stdout, listed.stderr
    refused = cli(port, "topic", "list")
    assert refused.returncode != 0 and "no credentials" in refused.stderr
