"""The chart's TLS and secret values boot: the broker container as the rendered
Deployment states it, with the Secrets it mounts projected into folders as the
kubelet does, reaches a real etcd over TLS with a user and password (file), a
real Redis over TLS with its password filled into the URL from a Secret, and
serves /metrics over HTTPS to a scraper with a client certificate. Callers are
known by a token from the principals file in a Secret of the operator's (no
anonymous access); one without it is refused. Neither password nor the token is
in any rendered manifest, nor in anything the broker writes."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.certs import Certs
from tests.deploy import kubelet
from tests.deploy.chart import broker_container, render
from tests.deploy.test_chart_boots import BIN, Pod
from tests.etcd_server import EtcdServer
from tests.redis_server import RedisServer
from tests.servers import free_port, require_binary, running, temporary_root

ETCD_PASSWORD = "etcd-pw-" + uuid.uuid4().hex[:8]
TOKEN = "ops-token-" + uuid.uuid4().hex
STORAGE_TLS = "/etc/dejaq/storage-tls"
STORAGE_URL = (
    f"rediss://rel-redis-tls:6380/0?ssl_ca_certs={STORAGE_TLS}/ca.crt"
    f"&ssl_certfile={STORAGE_TLS}/tls.crt&ssl_keyfile={STORAGE_TLS}/tls.key"
)


@pytest.fixture(scope="module")
def auth_etcd(certs: Certs) -> Iterator[EtcdServer]:
    server = EtcdServer(require_binary("etcd"), temporary_root("etcd-chart"), tls=certs)
    with running(server) as started:
        started.enable_auth("dejaq", ETCD_PASSWORD)
        yield started


def principals_file() -> str:
    """The principals file: ops, known by TOKEN, may do anything."""
    ops = {
        "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest(),
        "grants": [{"topics": "*", "allow": ["admin"]}],
    }
    return yaml.safe_dump({"principals": {"ops": ops}})


def tls_files(certs: Certs, name: str) -> dict[str, str]:
    """A Secret as cert-manager makes it: ca.crt, tls.crt, tls.key."""
    pair = certs.client(name)
    return {
        "ca.crt": certs.ca.read_text(),
        "tls.crt": pair.cert.read_text(),
        "tls.key": pair.key.read_text(),
    }


@pytest.fixture
def secure_pod(
    auth_etcd: EtcdServer,
    tls_redis_server: RedisServer,
    certs: Certs,
    tmp_path: Path,
) -> Iterator[Pod]:
    values = {
        "broker": {"port": free_port(), "auth": {"existingSecret": "dejaq-auth"}},
        "metrics": {
            "port": free_port(),
            "tls": {"enabled": True, "existingSecret": "metrics-tls", "clientCA": True},
        },
        "redis": {"enabled": False},
        "storage": {
            "url": STORAGE_URL,
            "passwordSecret": {"name": "redis-password"},
            "tls": {"existingSecret": "redis-client-tls"},
        },
        "etcd": {
            "enabled": False,
            "externalEndpoints": ["https://etcd-0.infra:2379"],
            "client": {
                "tls": {"enabled": True, "existingSecret": "etcd-client-tls"},
                "auth": {"enabled": True, "existingSecret": "etcd-auth"},
            },
        },
    }
    rendered = render(values)
    # The operator's own Secrets, which the chart only refers to.
    server_files = {
        "ca.crt": certs.ca.read_text(),
        "tls.crt": certs.server.cert.read_text(),
        "tls.key": certs.server.key.read_text(),
    }
    secrets = {
        **kubelet.secrets(rendered.manifests),
        "redis-password": {"password": tls_redis_server.password},
        "redis-client-tls": tls_files(certs, "redis-client"),
        "etcd-client-tls": tls_files(certs, "dejaq-broker"),
        "etcd-auth": {"username": "dejaq", "password": ETCD_PASSWORD},
        "metrics-tls": server_files,
        "dejaq-auth": {"auth": principals_file()},
    }
    container = broker_container(rendered)
    spec = rendered.one("Deployment")["spec"]["template"]["spec"]
    mounts = kubelet.mount_secrets(spec, container, secrets, tmp_path / "volumes")
    services = {"rel-redis-tls": tls_redis_server.port, "etcd-0": auth_etcd.port}
    env = {
        name: kubelet.to_local_paths(kubelet.to_loopback(value, services), mounts)
        for name, value in kubelet.container_env(container, secrets, "rel-dejaq-5c4b-q8w2z").items()
    }
    command = [
        kubelet.to_local_paths(part, mounts)
        for part in [*container["command"], *container.get("args", [])]
    ]
    with (tmp_path / "broker.log").open("wb") as log:
        process = subprocess.Popen(
            command, env={"PATH": f"{BIN}:{os.environ['PATH']}", **env}, stdout=log, stderr=log
        )
    try:
        yield Pod(rendered, container, env, process, client_env={"DEJAQ_TOKEN": TOKEN})
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_chart_boots_over_tls_with_secrets_it_never_shows(
    secure_pod: Pod,
    tls_redis_server: RedisServer,
    certs: Certs,
    tmp_path: Path,
) -> None:
    pod = secure_pod
    passwords = (ETCD_PASSWORD, tls_redis_server.password, TOKEN)
    # Given a rendered chart whose manifests hold neither password nor the token
    manifests = yaml.safe_dump_all(pod.rendered.manifests)
    assert not any(secret in manifests for secret in passwords)
    storage = next(e for e in pod.container["env"] if e["name"] == "DEJAQ_STORAGE")
    assert storage["value"].startswith("rediss://:$(STORAGE_PASSWORD)@rel-redis-tls:6380/0?")

    # When the kubelet starts it: started and ready (storage over TLS, etcd over TLS with a user)
    kubelet.until_probe_passes(pod.container["startupProbe"])
    assert pod.probe("readinessProbe")
    shown = pod.dejaq("cluster", "status", "--json")
    status = json.loads(shown)
    assert status["healthy"] and status["brokers"][0]["address"] == pod.address
    assert not any(secret in shown + pod.dejaq("cluster", "status") for secret in passwords)

    # Then messages go through it
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    pod.dejaq("topic", "create", topic)
    due = int(time.time() * 1000)
    line = json.dumps({"id": "m1", "timestamp_ms": due, "payload": "p"})
    assert pod.dejaq("produce", topic, "--jsonl", "-", stdin=line + "\n").startswith("accepted 1,")
    assert json.loads(pod.dejaq("consume", topic, "--count", "1"))["id"] == "m1"
    # ... for callers the principals file knows: without the token, nothing
    anonymous = subprocess.run(
        ["dejaq", "topic", "list"],
        env={"PATH": f"{BIN}:{os.environ['PATH']}", "DEJAQ_BROKER": pod.address},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert anonymous.returncode == 1 and "no credentials" in anonymous.stderr

    # And /metrics answers a scraper with a client certificate, over HTTPS
    context = ssl.create_default_context(cafile=str(certs.ca))
    scraper = certs.client("prometheus")
    context.load_cert_chain(str(scraper.cert), str(scraper.key))
    port = pod.container["ports"][1]["containerPort"]
    url = f"https://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5, context=context) as reply:
        metrics = reply.read().decode()
    assert f'dejaq_produced_total{{kind="timeline",topic="{topic}"}} 1.0' in metrics

    # And after it stops, neither password is in its output or its metrics
    pod.process.send_signal(signal.SIGTERM)
    assert pod.process.wait(30) == 0
    written = (tmp_path / "broker.log").read_text() + metrics
    assert not any(secret in written for secret in passwords)
