"""A broker process waiting at start-up for a storage it cannot reach yet:
it says so in its log, and SIGTERM stops it there as it stops a serving one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.broker_process import BrokerProcess
from tests.servers import free_port

pytestmark = pytest.mark.timeout(60)
WAITING = "storage not ready, retrying"
LOG_TIMEOUT_S = 30.0


def test_sigterm_stops_a_broker_still_waiting_for_its_storage(tmp_path: Path) -> None:
    # Given a broker started on a Redis address nothing listens on
    broker = BrokerProcess(f"redis://127.0.0.1:{free_port()}/0", tmp_path / "broker.log")
    broker.launch()
    try:
        # When it has said it waits for the storage
        deadline = time.monotonic() + LOG_TIMEOUT_S
        while WAITING not in broker.log_path.read_text():
            assert broker.alive, f"the broker exited; its log ends:\n{broker.log_tail()}"
            assert time.monotonic() < deadline, f"no wait logged:\n{broker.log_tail()}"
            time.sleep(0.05)
        # Then SIGTERM ends it at once and cleanly (no SIGKILL after the grace period)
        assert broker.stop() == 0, broker.log_tail()
        assert "stopped before it served" in broker.log_path.read_text()
    finally:
        broker.kill()
