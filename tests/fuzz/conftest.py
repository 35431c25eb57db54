"""Hypothesis settings for the fuzz stories, and the live brokers they fuzz.

Under ``CI=true`` the ``ci`` profile runs: derandomized (the same examples on
every run, so a red CI run replays locally with ``CI=true``) and without the
example database. Elsewhere the ``dev`` profile draws fresh examples each run
and remembers failing ones in ``.hypothesis/``. Each test sets its own
``max_examples`` so the whole folder stays within about a minute.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.e2e.broker_process import STORAGES
from tests.fuzz.live import LiveBroker
from tests.servers import in_ci

# Examples talk to a live broker: fixtures are module-scoped on purpose, and a
# slow example is the shared 2-core machine, not the code under test.
_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, **_COMMON)
settings.register_profile("dev", print_blob=True, **_COMMON)
settings.load_profile("ci" if in_ci() else "dev")


@pytest.fixture(scope="module", params=STORAGES)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBroker]:
    """One broker process per test module and storage kind."""
    broker = LiveBroker(request.param, tmp_path_factory.mktemp(f"fuzz-{request.param}"))
    try:
        yield broker.start()
    finally:
        code = broker.close()
    assert code == 0, (
        f"the fuzzed broker did not stop cleanly ({code}):\n{broker.process.log_tail()}"
    )


@pytest.fixture(autouse=True)
def keeps_serving(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every test on a live broker: it is alive, and the heartbeat client
    on another topic kept receiving while the test fuzzed."""
    yield
    if "live" in request.fixturenames:
        broker: LiveBroker = request.getfixturevalue("live")
        log = broker.process.log_tail
        assert broker.process.alive, f"the broker died; its log ends:\n{log()}"
        broker.heartbeat.assert_serving()
