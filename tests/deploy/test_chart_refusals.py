"""Values that would strand messages, that leave the brokers open to anyone
without saying so, or that do not fit together (a TLS switch without its
Secret, TLS on one side of a link only), are refused when the chart
renders (`helm install` stops before creating anything), and values.schema.json
refuses wrong keys and types with the path of the bad value."""

from __future__ import annotations

import pytest

from tests.deploy.chart import OWN_STORAGE, VALUE_SETS, Values, helm, render

REFUSED: dict[str, tuple[Values, str]] = {
    "memory with several brokers": (
        {**OWN_STORAGE, "storage": {"url": "memory://"}},
        "memory:// keeps messages inside one broker",
    ),
    "per-pod sqlite with several brokers": (
        {**OWN_STORAGE, "replicaCount": 2, "storage": {"url": "sqlite:///var/lib/dejaq/d.db"}},
        "sqlite:// is a file inside one pod",
    ),
    "no storage": (OWN_STORAGE, "set exactly one of storage.url"),
    "two storages": (
        {"storage": {"url": "redis://r:6379/0"}},
        "set exactly one of storage.url",
    ),
    "several brokers without etcd": (
        {"etcd": {"enabled": False}},
        "replicaCount=3 needs etcd",
    ),
    "bundled and external etcd": (
        {"etcd": {"externalEndpoints": ["http://e:2379"]}},
        "set etcd.enabled=false to use etcd.externalEndpoints",
    ),
    "bridges with auth": (
        {"broker": {"auth": {"existingSecret": "a"}, "bridges": {"existingSecret": "b"}}},
        "broker.bridges: the brokers' bridges reach them on loopback",
    ),
    "broker TLS without its Secret": (
        {"broker": {"tls": {"enabled": True}}},
        "broker.tls.enabled needs broker.tls.existingSecret",
    ),
    "etcd auth without its Secret": (
        {"etcd": {"client": {"auth": {"enabled": True}}}},
        "etcd.client.auth.enabled needs etcd.client.auth.existingSecret",
    ),
    "neither a principals file nor anonymous access": (
        {},
        "set broker.auth.existingSecret=SECRET (a Secret holding the principals file",
    ),
    "anonymous access not chosen, only spelled out as false": (
        {"broker": {"auth": {"insecureAllowAnonymous": False}}},
        "broker.auth.insecureAllowAnonymous=true (anyone who reaches the Service may read,",
    ),
    "a principals file and anonymous access": (
        {"broker": {"auth": {"existingSecret": "a", "insecureAllowAnonymous": True}}},
        "not both",
    ),
    "bundled etcd over TLS, brokers without a client certificate": (
        {"etcd": {"tls": {"enabled": True, "existingSecret": "etcd-tls"}}},
        "etcd.tls and etcd.client.tls go together",
    ),
    "client TLS towards a plain bundled etcd": (
        {"etcd": {"client": {"tls": {"enabled": True, "existingSecret": "c"}}}},
        "etcd.tls and etcd.client.tls go together",
    ),
    "client TLS towards http:// endpoints": (
        {
            "etcd": {
                "enabled": False,
                "externalEndpoints": ["http://e:2379"],
                "client": {"tls": {"enabled": True, "existingSecret": "c"}},
            }
        },
        "needs https:// etcd.externalEndpoints",
    ),
    "mixed etcd schemes": (
        {"etcd": {"enabled": False, "externalEndpoints": ["http://e1:2379", "https://e2:2379"]}},
        "mix https:// and http://",
    ),
    "metrics TLS with metrics off": (
        {"metrics": {"enabled": False, "tls": {"enabled": True, "existingSecret": "m"}}},
        "metrics.tls.enabled needs metrics.enabled=true",
    ),
    "a password Secret for the bundled Redis": (
        {"storage": {"passwordSecret": {"name": "pw"}}},
        "storage.passwordSecret fills in the password of storage.url",
    ),
    "a password both in the URL and in a Secret": (
        {
            **OWN_STORAGE,
            "storage": {"url": "redis://:inline@r:6379/0", "passwordSecret": {"name": "pw"}},
        },
        "storage.url already carries a password",
    ),
}

SCHEMA_REFUSED: dict[str, tuple[Values, str]] = {
    "unknown key": ({"replicas": 3}, "replicas"),
    "latest tag": ({"image": {"tag": "latest"}}, "/image/tag"),
    "unknown storage scheme": (
        {**OWN_STORAGE, "storage": {"url": "mysql://db/dejaq"}},
        "/storage/url",
    ),
    "even etcd members": ({"etcd": {"replicaCount": 2}}, "/etcd/replicaCount"),
    "a variable the broker would refuse": (
        {"broker": {"extraEnv": [{"name": "GRACE", "value": "1"}]}},
        "/broker/extraEnv/0/name",
    ),
}


@pytest.mark.parametrize(("values", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_render_refuses(values: Values, message: str) -> None:
    with pytest.raises(helm().HelmError) as refused:
        render(values)

    assert message in str(refused.value)


@pytest.mark.parametrize(("values", "where"), SCHEMA_REFUSED.values(), ids=SCHEMA_REFUSED.keys())
def test_schema_refuses(values: Values, where: str) -> None:
    with pytest.raises(helm().HelmError) as refused:
        render(values)

    assert "values don't meet the specifications of the schema" in str(refused.value)
    assert where in str(refused.value)


def test_one_broker_on_memory_is_allowed_with_a_warning() -> None:
    rendered = render(VALUE_SETS["memory-one-broker"])

    assert "messages are lost when it restarts" in rendered.notes
    # A budget of one broker would block every node drain.
    assert not [m for m in rendered.manifests if m["kind"] == "PodDisruptionBudget"]
