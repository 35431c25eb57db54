"""The chart boots: the broker container exactly as the rendered Deployment
states it (command, args, environment from values, fields and the storage
Secret), with anonymous access as a trial installs it, runs against a real
etcd and a real Redis on loopback, with the in-cluster addresses mapped there.
The kubelet's gRPC probes decide it is started, ready and alive; a storage
outage makes it unready but not dead; the dejaq CLI produces and consumes
through it; SIGTERM ends it within the grace period."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import kubelet
from tests.deploy.chart import Rendered, broker_container, render
from tests.etcd_server import EtcdServer
from tests.redis_server import RedisServer
from tests.servers import free_port

MESSAGES = 200
CLI_TIMEOUT_S = 60
BIN = Path(sys.executable).parent


@dataclass
class Pod:
    """The broker container of the rendered chart, run as a local process."""

    rendered: Rendered
    container: dict[str, Any]
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    client_env: dict[str, str] = field(default_factory=dict)  # e.g. DEJAQ_TOKEN

    def probe(self, kind: str) -> bool:
        return kubelet.grpc_probe(self.container[kind])

    @property
    def address(self) -> str:
        return f"{kubelet.POD_IP}:{self.container['ports'][0]['containerPort']}"

    def dejaq(self, *args: str, stdin: str | None = None) -> str:
        """The ``dejaq`` CLI against this broker; its output."""
        env = {
            "PATH": f"{BIN}:{os.environ['PATH']}",
            "DEJAQ_BROKER": self.address,
            **self.client_env,
        }
        result = subprocess.run(
            ["dejaq", *args],
            input=stdin,
            env=env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout


@pytest.fixture
def pod(
    redis: RedisServer,
    etcd_server: EtcdServer,
    tmp_path: Path,
) -> Iterator[Pod]:
    # A free port stands in for the pod's own IP; the values are what people set to
    # try dejaq out (anonymous access: the chart refuses to guess it).
    values = {
        "broker": {"port": free_port(), "auth": {"insecureAllowAnonymous": True}},
        "metrics": {"port": free_port()},
    }
    rendered = render(values)
    container = broker_container(rendered)
    services = {"rel-dejaq-redis": redis.port, "rel-dejaq-etcd-headless": etcd_server.port}
    pod_env = kubelet.container_env(
        container, kubelet.secrets(rendered.manifests), "rel-dejaq-7d9f-x2x4p"
    )
    env = {name: kubelet.to_loopback(value, services) for name, value in pod_env.items()}
    # What the image adds: its PATH (the Deployment's command is a bare "dejaq").
    process_env = {"PATH": f"{BIN}:{os.environ['PATH']}", **env}
    command = [*container["command"], *container.get("args", [])]
    assert shutil.which(command[0], path=process_env["PATH"]), command
    with (tmp_path / "broker.log").open("wb") as log:
        process = subprocess.Popen(command, env=process_env, stdout=log, stderr=log)
    try:
        yield Pod(rendered, container, env, process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_rendered_broker_boots_serves_and_stops(pod: Pod, redis: RedisServer) -> None:
    # Given the pod as the chart states it: in a cluster, storage from the Secret,
    # open to anyone who reaches it because the values say so
    assert pod.container["args"] == ["--insecure-allow-anonymous"]
    assert pod.env["DEJAQ_STORAGE"] == f"redis://127.0.0.1:{redis.port}/0"
    assert pod.env["DEJAQ_ADVERTISE"] == pod.address
    assert pod.env["DEJAQ_CLUSTER"] == "rel-dejaq"

    # When the kubelet probes it: started, then ready and alive
    kubelet.until_probe_passes(pod.container["startupProbe"])
    assert pod.probe("readinessProbe") and pod.probe("livenessProbe")

    # Then the CLI produces and consumes through it, nothing early
    topic = f"boot-{uuid.uuid4().hex[:8]}"
    pod.dejaq("topic", "create", topic, "--buckets", "8")
    due = int(time.time() * 1000) + 1500
    lines = [
        json.dumps({"id": f"m{i}", "timestamp_ms": due + i, "payload": f"p{i}"})
        for i in range(MESSAGES)
    ]
    assert pod.dejaq("produce", topic, "--jsonl", "-", stdin="\n".join(lines) + "\n").startswith(
        f"accepted {MESSAGES},"
    )
    consumed = pod.dejaq("consume", topic, "--count", str(MESSAGES))
    got = [json.loads(line) for line in consumed.splitlines()]
    assert {d["id"] for d in got} == {f"m{i}" for i in range(MESSAGES)}
    assert all(d["received_at_ms"] >= d["timestamp_ms"] for d in got)
    status = json.loads(pod.dejaq("cluster", "status", "--json"))
    assert status["brokers"][0]["address"] == pod.address

    # When storage goes away: not ready (out of the Service), still alive (no restart)
    redis.kill()
    assert wait_for(lambda: not pod.probe("readinessProbe"), seconds=10)
    assert pod.probe("livenessProbe")
    redis.start()
    kubelet.until_probe_passes(pod.container["readinessProbe"])

    # When the pod is deleted (after its preStop): SIGTERM ends it within the grace period
    spec = pod.rendered.one("Deployment")["spec"]["template"]["spec"]
    pre_stop = pod.container["lifecycle"]["preStop"]["sleep"]["seconds"]
    pod.process.send_signal(signal.SIGTERM)
    assert pod.process.wait(spec["terminationGracePeriodSeconds"] - pre_stop) == 0


def wait_for(condition: Any, seconds: float) -> bool:
    """Poll ``condition`` under a deadline."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False
