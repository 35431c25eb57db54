"""How the chart wires TLS and secrets: the broker's own TLS and auth flags only
when asked for, every file it is given mounted read-only from the named Secret,
the storage password filled in by the kubelet (in no manifest), the bundled
etcd over TLS for clients and peers, /metrics over HTTPS."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.chart import OWN_STORAGE, VALUE_SETS, Rendered, broker_container, render

SECURE = VALUE_SETS["tls-everywhere"]


def env_of(rendered: Rendered) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in broker_container(rendered)["env"]}


@pytest.mark.parametrize(
    ("values", "args"),
    [
        ({}, []),
        (
            SECURE,
            [
                "--tls-cert=/etc/dejaq/tls/tls.crt",
                "--tls-key=/etc/dejaq/tls/tls.key",
                "--tls-client-ca=/etc/dejaq/tls/ca.crt",
                "--auth=/etc/dejaq/auth/auth",
            ],
        ),
        ({"broker": {"auth": {"insecureAllowAnonymous": True}}}, ["--insecure-allow-anonymous"]),
    ],
    ids=["defaults", "tls and auth", "anonymous"],
)
def test_the_broker_gets_its_tls_and_auth_flags_only_when_asked(
    values: dict[str, Any], args: list[str]
) -> None:
    assert broker_container(render(values)).get("args", []) == args


def test_every_file_the_broker_is_given_is_mounted_from_its_secret() -> None:
    rendered = render(SECURE)
    container = broker_container(rendered)
    volumes = {
        v["name"]: v for v in rendered.one("Deployment")["spec"]["template"]["spec"]["volumes"]
    }
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    given = [a.split("=", 1)[1] for a in container["args"]]
    given += [e["value"] for e in container["env"] if str(e.get("value", "")).startswith("/etc/")]
    given += ["/etc/dejaq/storage-tls/ca.crt"]  # named by the storage URL

    secrets = {}
    for path in given:
        folder = path.rsplit("/", 1)[0]
        assert folder in mounts, path
        secrets[folder] = mounts[folder]["secret"]["secretName"]
        assert mounts[folder]["secret"]["defaultMode"] == 0o440
    assert secrets == {
        "/etc/dejaq/tls": "dejaq-tls",
        "/etc/dejaq/auth": "dejaq-auth",
        "/etc/dejaq/etcd-tls": "etcd-client-tls",
        "/etc/dejaq/etcd-auth": "etcd-auth",
        "/etc/dejaq/metrics-tls": "metrics-tls",
        "/etc/dejaq/storage-tls": "pg-ca",
    }
    assert all(m["readOnly"] for m in container["volumeMounts"] if m["mountPath"] in secrets)
    assert volumes["etcd-auth"]["secret"]["items"] == [{"key": "password", "path": "password"}]
    assert env_of(rendered)["DEJAQ_ETCD_USER"]["valueFrom"]["secretKeyRef"] == {
        "name": "etcd-auth",
        "key": "username",
    }


@pytest.mark.parametrize(
    ("url", "filled"),
    [
        (
            "postgresql://dejaq@db:5432/d?sslmode=verify-full",
            "postgresql://dejaq:$(STORAGE_PASSWORD)@db:5432/d?sslmode=verify-full",
        ),
        ("rediss://redis.data:6380/0", "rediss://:$(STORAGE_PASSWORD)@redis.data:6380/0"),
    ],
)
def test_the_storage_password_is_filled_in_by_the_kubelet(url: str, filled: str) -> None:
    rendered = render(
        {**OWN_STORAGE, "storage": {"url": url, "passwordSecret": {"name": "pw", "key": "p"}}}
    )
    env = broker_container(rendered)["env"]
    names = [e["name"] for e in env]

    # The variable comes from the Secret, and before the URL that refers to it
    assert env[names.index("STORAGE_PASSWORD")]["valueFrom"]["secretKeyRef"] == {
        "name": "pw",
        "key": "p",
    }
    assert names.index("STORAGE_PASSWORD") < names.index("DEJAQ_STORAGE")
    assert env[names.index("DEJAQ_STORAGE")]["value"] == filled
    # And the chart makes no Secret of its own for the URL
    assert not [m for m in rendered.manifests if m["kind"] == "Secret"]


def test_the_bundled_etcd_serves_clients_and_peers_over_tls() -> None:
    rendered = render(SECURE)
    etcd = rendered.one("StatefulSet", "rel-dejaq-etcd")["spec"]["template"]["spec"]
    args = etcd["containers"][0]["args"]
    flags = dict(a.removeprefix("--").partition("=")[::2] for a in args)

    assert flags["listen-client-urls"] == "https://0.0.0.0:2379"
    assert flags["listen-peer-urls"] == "https://0.0.0.0:2380"
    assert all(
        m.split("=", 1)[1].startswith("https://") for m in flags["initial-cluster"].split(",")
    )
    assert "client-cert-auth" in flags and "peer-client-cert-auth" in flags
    assert flags["trusted-ca-file"] == "/etc/etcd/tls/ca.crt"
    assert etcd["volumes"] == [
        {"name": "tls", "secret": {"secretName": "etcd-server-tls", "defaultMode": 0o440}}
    ]
    # The probes stay on the plain metrics listener
    assert flags["listen-metrics-urls"] == "http://0.0.0.0:2381"
    endpoints = env_of(rendered)["DEJAQ_ETCD"]["value"].split(",")
    assert len(endpoints) == 3 and all(e.startswith("https://rel-dejaq-etcd-") for e in endpoints)


def test_metrics_are_scraped_over_https() -> None:
    rendered = render(SECURE)
    annotations = rendered.one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    endpoint = rendered.one("ServiceMonitor")["spec"]["endpoints"][0]

    assert annotations["prometheus.io/scheme"] == "https"
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": False}
    assert (
        env_of(rendered)["DEJAQ_METRICS_TLS_CLIENT_CA"]["value"] == "/etc/dejaq/metrics-tls/ca.crt"
    )
