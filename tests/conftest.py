"""Settings for the whole test session."""

import os
from pathlib import Path

# Some fixtures fork server tools (pg_ctl as another user) from this process,
# which also runs gRPC clients. gRPC's fork handlers then crash the child now
# and then; the tests never use gRPC in a forked child, so turn them off before
# grpc is first imported.
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"


import pytest

from tests.certs import Certs, make_certs

# The servers every folder shares, declared here once: a session fixture imported
# into several modules is a fixture of each, and would start its server once for
# every module that imports it.
from tests.etcd_server import etcd_server  # noqa: F401 - fixture
from tests.nats_server import nats_server  # noqa: F401 - fixture
from tests.otel import otel  # noqa: F401 - fixture: the OpenTelemetry SDK, in memory
from tests.postgres_server import postgres_server, tls_postgres_server  # noqa: F401 - fixture
from tests.rabbitmq_server import rabbitmq_server  # noqa: F401 - fixture
from tests.redis_cluster import redis_cluster, tls_redis_cluster  # noqa: F401 - fixture
from tests.redis_sentinel import (  # noqa: F401 - fixtures
    auth_redis_sentinel,
    redis_sentinel,
    tls_redis_sentinel,
)
from tests.redis_server import redis_server, tls_redis_server  # noqa: F401 - fixture
from tests.servers import FAST_TIER


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A throwaway CA with server and client certificates (PEM files)."""
    return make_certs(tmp_path_factory.mktemp("certs"))


# -- the fast tier (``scripts/test.sh --fast``) ---------------------------------

ROOT = Path(__file__).resolve().parents[1]
# The in-process tests: the core, the broker driven in-process, the driver, and
# the storage conformance suite. Everything else starts servers or brokers.
FAST_PATHS = (
    "tests/core",
    "tests/broker",
    "tests/driver",
    "tests/storage_plugins",
    "tests/test_layers.py",
    "tests/test_packaging.py",
)
# Backends that run as a server of their own, and the fixtures that start one.
SERVED_BACKENDS = frozenset({"redis", "redis-cluster", "redis-sentinel", "postgres"})
SERVER_FIXTURES = frozenset(
    {
        "redis_server",
        "redis_cluster",
        "tls_redis_cluster",
        "redis_sentinel",
        "tls_redis_sentinel",
        "auth_redis_sentinel",
        "tls_redis_server",
        "own_redis",
        "postgres_server",
        "tls_postgres_server",
        "etcd_server",
        "own_server",
        "nats_server",
        "rabbitmq_server",
    }
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="run only the in-process tier: no Redis, PostgreSQL, etcd, Spark or broker process",
    )


def pytest_configure(config: pytest.Config) -> None:
    FAST_TIER["on"] = bool(config.getoption("--fast"))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``--fast``, do not even import what lies outside the fast paths
    (collecting the whole tree alone takes longer than the tier's tests)."""
    path = collection_path.resolve()
    if not config.getoption("--fast") or path == ROOT or not path.is_relative_to(ROOT):
        return None
    where = path.relative_to(ROOT).as_posix()
    inside = any(where == p or where.startswith(p + "/") for p in FAST_PATHS)
    above = any(p.startswith(where + "/") for p in FAST_PATHS)
    return None if inside or above else True


def in_fast_tier(item: pytest.Item) -> bool:
    """Whether ``item`` runs in-process and briefly: under a fast path, not
    marked ``long``, not in a module of a served backend (``test_redis*.py``),
    on no served backend (a parameter naming one) and with no server fixture."""
    where = item.path.relative_to(ROOT).as_posix()
    if not any(where == p or where.startswith(p + "/") for p in FAST_PATHS):
        return False
    if item.get_closest_marker("long") is not None:
        return False
    if any(item.path.name.startswith(f"test_{backend}") for backend in SERVED_BACKENDS):
        return False
    params = getattr(item, "callspec", None)
    if params is not None and SERVED_BACKENDS & {str(v) for v in params.params.values()}:
        return False
    return not SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--fast"):
        return
    keep = [item for item in items if in_fast_tier(item)]
    dropped = [item for item in items if not in_fast_tier(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep
