"""An external Redis Cluster or Sentinel behind the brokers: its URL comes from a
Secret of the user's (``storage.existingSecret`` and its key) into the variable
the broker reads (``DEJAQ_STORAGE``), or from ``storage.url`` with the password
from a Secret; either way the URL the pod gets is one the backend reads."""

from __future__ import annotations

import pytest

from dejaq.broker.config import BrokerConfig
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.redis.storage import RedisStorage
from tests.deploy.chart import ANONYMOUS, OWN_STORAGE, broker_container, render

CLUSTER = "redis+cluster://redis-0.data:6379,redis-1.data:6379,redis-2.data:6379/0"
SENTINEL = "redis+sentinel://sentinel-0.data:26379,sentinel-1.data:26379/mymaster/0"


def test_broker_config_reads_its_storage_url_from_dejaq_storage() -> None:
    # The variable the chart fills is the one the broker reads
    config = BrokerConfig.from_sources({}, {"DEJAQ_STORAGE": SENTINEL})
    assert config.storage == SENTINEL


@pytest.mark.parametrize("key", ["url", "sentinel-url"])
def test_a_storage_url_from_an_existing_secret_reaches_the_broker(key: str) -> None:
    # Given values naming a Secret of the user's and the key holding the URL
    rendered = render(
        {
            **ANONYMOUS,
            **OWN_STORAGE,
            "storage": {"existingSecret": "redis-sentinel", "existingSecretKey": key},
        }
    )
    # Then the broker reads DEJAQ_STORAGE from that key of that Secret
    env = {e["name"]: e for e in broker_container(rendered)["env"]}
    assert env["DEJAQ_STORAGE"] == {
        "name": "DEJAQ_STORAGE",
        "valueFrom": {"secretKeyRef": {"name": "redis-sentinel", "key": key}},
    }
    # And the chart makes no Secret of its own
    assert not [m for m in rendered.manifests if m["kind"] == "Secret"]


@pytest.mark.parametrize(
    ("url", "filled"),
    [
        (CLUSTER, CLUSTER.replace("://", "://:$(STORAGE_PASSWORD)@")),
        (
            f"{SENTINEL}?wait_replicas=1",
            SENTINEL.replace("://", "://:$(STORAGE_PASSWORD)@") + "?wait_replicas=1",
        ),
        (
            CLUSTER.replace("redis+", "rediss+"),
            CLUSTER.replace("redis+cluster://", "rediss+cluster://:$(STORAGE_PASSWORD)@"),
        ),
    ],
)
def test_a_cluster_or_sentinel_url_takes_its_password_from_a_secret(url: str, filled: str) -> None:
    # Given a cluster or sentinel URL without its password, and the password's Secret
    rendered = render(
        {
            **ANONYMOUS,
            **OWN_STORAGE,
            "storage": {"url": url, "passwordSecret": {"name": "redis-pw", "key": "password"}},
        }
    )
    env = {e["name"]: e for e in broker_container(rendered)["env"]}
    # Then the kubelet writes the password into the URL the broker reads
    assert env["STORAGE_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "redis-pw",
        "key": "password",
    }
    assert env["DEJAQ_STORAGE"]["value"] == filled
    # And once filled in, the backend reads that password from it
    storage = storage_from_url(filled.replace("$(STORAGE_PASSWORD)", "s3cret"))
    assert isinstance(storage, RedisStorage)
    assert storage.options.password == "s3cret"
