"""Rules every rendered workload follows, whatever the values: resources and
probes on every container, non-root with all capabilities dropped, pinned image
tags, app.kubernetes.io/* labels; and the broker's own wiring (gRPC probes, a
grace period that covers its graceful stop, no service links)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.chart import VALUE_SETS, Rendered, Values, broker_container, pod_specs, render

LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
)
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


@pytest.fixture(params=list(VALUE_SETS.values()), ids=list(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> Rendered:
    values: Values = request.param
    return render(values)


def containers(rendered: Rendered) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, pod spec, container) of every container, init containers too."""
    return [
        (f"{where}/{c['name']}", spec, c)
        for where, spec in pod_specs(rendered.manifests)
        for c in spec["containers"] + spec.get("initContainers", [])
    ]


def test_every_container_has_resources_and_probes(rendered: Rendered) -> None:
    for where, _, c in containers(rendered):
        assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"], where
        assert c["resources"]["limits"]["memory"], where
        assert all(probe in c for probe in PROBES), where


def test_every_container_runs_as_non_root_with_no_capabilities(rendered: Rendered) -> None:
    for where, spec, c in containers(rendered):
        pod, own = spec["securityContext"], c["securityContext"]
        assert pod["runAsNonRoot"] and own["runAsNonRoot"], where
        assert pod["runAsUser"] != 0, where
        assert own["allowPrivilegeEscalation"] is False, where
        assert own["readOnlyRootFilesystem"] is True, where
        assert own["capabilities"]["drop"] == ["ALL"], where
        assert pod["seccompProfile"]["type"] == "RuntimeDefault", where


def test_images_are_pinned(rendered: Rendered) -> None:
    for where, _, c in containers(rendered):
        repository, _, tag = c["image"].rpartition(":")
        assert repository and tag and "/" not in tag, (where, c["image"])
        assert tag != "latest", where


def test_every_object_carries_the_standard_labels(rendered: Rendered) -> None:
    for m in rendered.manifests:
        labels = m["metadata"]["labels"]
        assert all(labels.get(key) for key in LABELS), (m["kind"], m["metadata"]["name"])
        assert labels["app.kubernetes.io/instance"] == "rel"
    for where, _, _ in containers(rendered):
        kind, name = where.split("/")[:2]
        template = rendered.one(kind, name)["spec"]["template"]["metadata"]["labels"]
        assert all(template.get(key) for key in LABELS), where


def test_broker_probes_ask_the_grpc_health_service(rendered: Rendered) -> None:
    broker = broker_container(rendered)
    port = broker["ports"][0]["containerPort"]
    if "--tls-cert=/etc/dejaq/tls/tls.crt" in broker.get("args", []):
        # Kubernetes' gRPC probes speak no TLS: they can only see the port open.
        assert all(broker[probe]["tcpSocket"]["port"] == port for probe in PROBES)
        return

    services = {probe: broker[probe]["grpc"] for probe in PROBES}

    assert all(grpc["port"] == port for grpc in services.values())
    assert services["readinessProbe"]["service"] == ""  # NOT_SERVING while storage is down
    assert services["livenessProbe"]["service"] == "liveness"  # no restarts for a storage outage


def test_grace_period_covers_prestop_and_the_graceful_stop(rendered: Rendered) -> None:
    spec = rendered.one("Deployment")["spec"]["template"]["spec"]
    broker = broker_container(rendered)
    env = {e["name"]: e.get("value") for e in broker["env"]}

    pre_stop = broker["lifecycle"]["preStop"]["sleep"]["seconds"]
    graceful_stop = float(env["DEJAQ_GRACE_S"])

    assert spec["terminationGracePeriodSeconds"] > pre_stop + graceful_stop


def test_no_service_links_reach_the_broker(rendered: Rendered) -> None:
    """A Service named dejaq would inject DEJAQ_PORT=..., which the broker refuses."""
    spec = rendered.one("Deployment")["spec"]["template"]["spec"]

    assert spec["enableServiceLinks"] is False


def test_brokers_are_spread_and_guarded_by_a_budget(rendered: Rendered) -> None:
    deployment = rendered.one("Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]

    assert {c["topologyKey"] for c in spread} >= {"kubernetes.io/hostname"}
    assert all(c["labelSelector"]["matchLabels"] == selector for c in spread)
    if deployment["spec"]["replicas"] > 1:
        budget = rendered.one("PodDisruptionBudget", deployment["metadata"]["name"])
        assert budget["spec"]["selector"]["matchLabels"] == selector


def test_services_reach_the_brokers() -> None:
    rendered = render(VALUE_SETS["anonymous"])
    selector = rendered.one("Deployment")["spec"]["selector"]["matchLabels"]

    client = rendered.one("Service", "rel-dejaq")
    headless = rendered.one("Service", "rel-dejaq-headless")

    assert client["spec"]["type"] == "ClusterIP" and headless["spec"]["clusterIP"] == "None"
    assert client["spec"]["selector"] == headless["spec"]["selector"] == selector


@pytest.mark.parametrize(
    ("values", "port", "protocol"),
    [("http", 8080, "http"), ("tls-everywhere", 7780, "https"), ("anonymous", None, None)],
)
def test_the_http_api_is_served_and_exposed_only_when_enabled(
    values: str, port: int | None, protocol: str | None
) -> None:
    rendered = render(VALUE_SETS[values])
    broker = broker_container(rendered)
    env = {e["name"]: e.get("value") for e in broker["env"]}
    ports = {p["name"]: p["containerPort"] for p in broker["ports"]}
    client = {p["name"]: p for p in rendered.one("Service", "rel-dejaq")["spec"]["ports"]}
    headless = {
        p["name"]: p for p in rendered.one("Service", "rel-dejaq-headless")["spec"]["ports"]
    }

    if port is None:
        assert not [name for name in env if name.startswith("DEJAQ_HTTP")]
        assert "http" not in ports and "http" not in client and "http" not in headless
        return
    assert env["DEJAQ_HTTP"] == f"0.0.0.0:{port}"
    assert env["DEJAQ_HTTP_HEADER_TIMEOUT_MS"] == "10000"
    assert env["DEJAQ_HTTP_BODY_TIMEOUT_MS"] == "60000"
    assert env["DEJAQ_HTTP_MAX_CONNECTIONS"] == "1000"
    assert ports["http"] == port
    assert (client["http"]["port"], client["http"]["targetPort"]) == (port, "http")
    assert client["http"]["appProtocol"] == protocol
    assert (headless["http"]["port"], headless["http"]["targetPort"]) == (port, "http")


def test_the_http_timeouts_and_connection_bound_reach_the_broker() -> None:
    slow = {"headerTimeoutMs": 2500, "bodyTimeoutMs": 9000, "maxConnections": 64}
    values = {**VALUE_SETS["http"], "http": {**VALUE_SETS["http"]["http"], **slow}}
    broker = broker_container(render(values))
    env = {e["name"]: e.get("value") for e in broker["env"]}
    assert env["DEJAQ_HTTP_HEADER_TIMEOUT_MS"] == "2500"
    assert env["DEJAQ_HTTP_BODY_TIMEOUT_MS"] == "9000"
    assert env["DEJAQ_HTTP_MAX_CONNECTIONS"] == "64"


def test_bundled_etcd_forms_one_cluster_of_three() -> None:
    etcd = render(VALUE_SETS["anonymous"]).one("StatefulSet", "rel-dejaq-etcd")
    args = etcd["spec"]["template"]["spec"]["containers"][0]["args"]
    flags = dict(a.removeprefix("--").split("=", 1) for a in args)

    members = flags["initial-cluster"].split(",")

    assert etcd["spec"]["replicas"] == 3 and etcd["spec"]["podManagementPolicy"] == "Parallel"
    assert [m.split("=")[0] for m in members] == [f"rel-dejaq-etcd-{i}" for i in range(3)]
    assert all(".rel-dejaq-etcd-headless.queues.svc.cluster.local:2380" in m for m in members)
    assert flags["auto-compaction-mode"] and flags["auto-compaction-retention"]
    assert etcd["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"


def test_bundled_redis_keeps_an_append_only_file() -> None:
    redis = render(VALUE_SETS["anonymous"]).one("StatefulSet", "rel-dejaq-redis")
    args = redis["spec"]["template"]["spec"]["containers"][0]["args"]

    assert args[args.index("--appendonly") + 1] == "yes"
    assert redis["spec"]["volumeClaimTemplates"]


def test_observability() -> None:
    rendered = render(VALUE_SETS["observability"])
    annotations = rendered.one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    monitor = rendered.one("ServiceMonitor")
    dashboard = rendered.one("ConfigMap", "rel-dejaq-dashboard")

    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "9100"
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    headless = rendered.one("Service", "rel-dejaq-headless")["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= headless.items()
    assert '"title": "dejaq timeline"' in dashboard["data"]["dejaq.json"]


def test_notes_never_show_a_storage_password() -> None:
    notes = render(VALUE_SETS["postgres-url"]).notes

    assert "postgresql://***@pg.data:5432/dejaq" in notes
    assert "secret" not in notes


@pytest.mark.parametrize("option", ["sentinel_password", "password", "sslpassword"])
def test_notes_never_show_a_password_given_as_a_url_option(option: str) -> None:
    # Given a storage URL that carries a password in its query (the sentinels', or libpq's)
    url = f"redis+sentinel://s-0.data:26379/mymaster/0?socket_timeout_ms=2000&{option}=hush&db=0"
    values = {**VALUE_SETS["sentinel-url"], "storage": {"url": url}}
    # When the chart is installed
    notes = render(values).notes
    # Then its notes show the URL with the option masked
    assert f"?socket_timeout_ms=2000&{option}=***&db=0" in notes
    assert "hush" not in notes
