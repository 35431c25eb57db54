"""The Helm chart in deploy/helm/dejaq, rendered offline (helm-python-sdk: Helm 4
as a library) into manifests a test can read.

``VALUE_SETS`` are the values people install with: the defaults plus anonymous
access (the chart refuses to render with no ``broker.auth`` choice), each
storage kind, external etcd, observability on, the HTTP API on, TLS and a principals file.
Lint, validation and policy tests run over every one of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from tests.servers import unavailable

# libyaml's parser: the pure-Python one took most of the chart stories' time
# (every ``one`` and ``manifests`` parses the rendered text again).
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "dejaq"
RELEASE = "rel"
NAMESPACE = "queues"

Values = dict[str, Any]
OWN_STORAGE = {"redis": {"enabled": False}}
# Anyone reaching the Service may do anything: what a trial installs with.
ANONYMOUS = {"broker": {"auth": {"insecureAllowAnonymous": True}}}
VALUE_SETS: dict[str, Values] = {
    "anonymous": ANONYMOUS,
    "auth-secret": {"broker": {"auth": {"existingSecret": "dejaq-auth"}}},
    "redis-url": {**ANONYMOUS, **OWN_STORAGE, "storage": {"url": "redis://redis.data:6379/0"}},
    "postgres-url": {
        **ANONYMOUS,
        **OWN_STORAGE,
        "storage": {"url": "postgresql://dejaq:secret@pg.data:5432/dejaq"},
    },
    "existing-secret": {
        **ANONYMOUS,
        **OWN_STORAGE,
        "storage": {"existingSecret": "dejaq-storage"},
    },
    # A master behind Sentinel, its password from a Secret filled in by the kubelet.
    "sentinel-url": {
        **ANONYMOUS,
        **OWN_STORAGE,
        "storage": {
            "url": "redis+sentinel://sentinel-0.data:26379,sentinel-1.data:26379/mymaster/0",
            "passwordSecret": {"name": "redis-password"},
        },
    },
    "sqlite-one-broker": {
        **ANONYMOUS,
        **OWN_STORAGE,
        "replicaCount": 1,
        "storage": {"url": "sqlite:///var/lib/dejaq/dejaq.db"},
    },
    "memory-one-broker": {
        **ANONYMOUS,
        **OWN_STORAGE,
        "replicaCount": 1,
        "etcd": {"enabled": False},
        "storage": {"url": "memory://"},
    },
    "external-etcd": {
        **ANONYMOUS,
        "etcd": {
            "enabled": False,
            "externalEndpoints": ["http://etcd-0.infra:2379", "http://etcd-1.infra:2379"],
        },
    },
    "http": {**ANONYMOUS, "http": {"enabled": True, "port": 8080}},
    # Bridges run by the brokers, their file from a Secret.
    "bridges": {
        "broker": {
            "auth": {"insecureAllowAnonymous": True},
            "bridges": {"existingSecret": "dejaq-bridges"},
        }
    },
    "observability": {
        **ANONYMOUS,
        "metrics": {"serviceMonitor": {"enabled": True}},
        "grafanaDashboard": {"enabled": True},
    },
    # Consumers scaled ahead of the due load, and an alert on a spike coming.
    "autoscaling": {
        **ANONYMOUS,
        "autoscaling": {"keda": {"enabled": True, "target": {"name": "workers"}, "topic": "sends"}},
        "alerts": {"dueSpike": {"enabled": True, "threshold": 50000}},
    },
    # TLS and secrets everywhere: brokers (mutual TLS, principals file), PostgreSQL
    # with verify-full and the password from a Secret, the bundled etcd over TLS with
    # client certificates and a user, /metrics over HTTPS.
    "tls-everywhere": {
        **OWN_STORAGE,
        "broker": {
            "tls": {"enabled": True, "existingSecret": "dejaq-tls", "clientCA": True},
            "auth": {"existingSecret": "dejaq-auth"},
        },
        "http": {"enabled": True},
        "storage": {
            "url": "postgresql://dejaq@pg.data:5432/dejaq?sslmode=verify-full"
            "&sslrootcert=/etc/dejaq/storage-tls/ca.crt",
            "passwordSecret": {"name": "pg-password"},
            "tls": {"existingSecret": "pg-ca"},
        },
        "etcd": {
            "tls": {"enabled": True, "existingSecret": "etcd-server-tls"},
            "client": {
                "tls": {"enabled": True, "existingSecret": "etcd-client-tls"},
                "auth": {"enabled": True, "existingSecret": "etcd-auth"},
            },
        },
        "metrics": {
            "tls": {"enabled": True, "existingSecret": "metrics-tls", "clientCA": True},
            "serviceMonitor": {"enabled": True, "tlsConfig": {"insecureSkipVerify": False}},
        },
    },
    "external-etcd-tls": {
        **ANONYMOUS,
        "etcd": {
            "enabled": False,
            "externalEndpoints": ["https://etcd-0.infra:2379", "https://etcd-1.infra:2379"],
            "client": {"tls": {"enabled": True, "existingSecret": "etcd-client-tls"}},
        },
    },
}


def helm() -> ModuleType:
    """helm_python, or skip (fail under CI=true) when the dev extra is missing."""
    try:
        import helm_python
    except ImportError:
        unavailable("helm-python-sdk is not installed (pip install -e '.[dev]')")
    return helm_python


@dataclass(frozen=True)
class Rendered:
    """The chart's manifests for one set of values, by template file."""

    files: Mapping[str, str]

    @property
    def manifests(self) -> list[dict[str, Any]]:
        docs: list[dict[str, Any]] = []
        for name, text in sorted(self.files.items()):
            if name.endswith(".yaml"):
                docs += [d for d in yaml.load_all(text, Loader=YAML_LOADER) if d]
        return docs

    @property
    def notes(self) -> str:
        return next((t for n, t in self.files.items() if n.endswith("NOTES.txt")), "")

    def one(self, kind: str, name: str = "") -> dict[str, Any]:
        """The manifest of ``kind`` (named ``name`` when given); exactly one must match."""
        found = [
            m
            for m in self.manifests
            if m["kind"] == kind and (not name or m["metadata"]["name"] == name)
        ]
        assert len(found) == 1, f"{len(found)} {kind} {name!r} in {self.kinds()}"
        return found[0]

    def kinds(self) -> list[str]:
        return [f"{m['kind']}/{m['metadata']['name']}" for m in self.manifests]


def render(values: Values | None = None) -> Rendered:
    """Render the chart as ``helm template rel deploy/helm/dejaq -n queues`` would."""
    chart = helm().Chart.load(str(CHART))
    files = chart.render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return Rendered(files)


def pod_specs(manifests: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind/name, pod spec) of every workload."""
    for m in manifests:
        if m["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield f"{m['kind']}/{m['metadata']['name']}", m["spec"]["template"]["spec"]


def broker_container(rendered: Rendered) -> dict[str, Any]:
    spec = rendered.one("Deployment")["spec"]["template"]["spec"]
    container: dict[str, Any] = next(c for c in spec["containers"] if c["name"] == "broker")
    return container
