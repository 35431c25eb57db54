"""The faults a run injects, one small function each: it picks its target with
the run's seeded random, breaks it, lets it stay broken for a while, mends
it, and returns the target's name. Adding a kind is adding a function to
``KINDS``.

The sleeps here are the faults' durations (how long a broker stays dead, a
consumer frozen), not waits for a condition.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Protocol

from tests.faults.processes import Broker, Worker
from tests.servers import LocalServer

CLOCK_STEP_S = 0.5  # how far a stepped broker's clock runs ahead


class Target(Protocol):
    """What a fault needs of the run."""

    brokers: list[Broker]
    consumers: list[Worker]
    storage: LocalServer | None  # None: embedded storage (SQLite), no server
    etcd: LocalServer
    lease_ms: int


Fault = Callable[[Target, random.Random], str]


def kill_broker(run: Target, rng: random.Random) -> str:
    """kill -9 a broker, restart it on the same port a moment later."""
    broker = rng.choice(run.brokers)
    broker.kill()
    time.sleep(rng.uniform(0.5, 2.0))
    broker.start()
    return broker.address


def freeze_consumer(run: Target, rng: random.Random) -> str:
    """SIGSTOP a consumer process mid-lease, SIGCONT it after more than a lease."""
    consumer = rng.choice(run.consumers)
    consumer.freeze()
    time.sleep(run.lease_ms / 1000 + rng.uniform(0.3, 1.5))
    consumer.thaw()
    return consumer.name


def restart_storage(run: Target, rng: random.Random) -> str:
    """Kill the storage server (redis-server SIGKILL, PostgreSQL immediate
    shutdown) and start it again on its files."""
    assert run.storage is not None, "embedded storage has no server to restart"
    run.storage.kill()
    time.sleep(rng.uniform(0.2, 1.0))
    run.storage.start()
    return run.storage.name


def restart_etcd(run: Target, rng: random.Random) -> str:
    """Kill etcd and start it again on its data."""
    run.etcd.kill()
    time.sleep(rng.uniform(0.2, 1.0))
    run.etcd.start()
    return "etcd"


def clock_step(run: Target, rng: random.Random) -> str:
    """Step one broker's clock 500 ms ahead for a few seconds, then back."""
    broker = rng.choice(run.brokers)
    broker.step_clock(CLOCK_STEP_S)
    time.sleep(rng.uniform(2.0, 4.0))
    broker.step_clock(0)
    time.sleep(2.0)  # libfaketime reads the file again within a second (or so)
    return broker.address


def clock_step_etcd_down(run: Target, rng: random.Random) -> str:
    """Kill etcd, step one broker's clock 500 ms ahead while no heartbeat can
    tell it, step it back, then start etcd again: the broker must notice its
    own step."""
    broker = rng.choice(run.brokers)
    run.etcd.kill()
    broker.step_clock(CLOCK_STEP_S)
    time.sleep(rng.uniform(2.0, 4.0))
    broker.step_clock(0)
    time.sleep(2.0)  # libfaketime reads the file again within a second (or so)
    run.etcd.start()
    return broker.address


KINDS: dict[str, Fault] = {
    "kill_broker": kill_broker,
    "freeze_consumer": freeze_consumer,
    "restart_storage": restart_storage,
    "restart_etcd": restart_etcd,
    "clock_step": clock_step,
    "clock_step_etcd_down": clock_step_etcd_down,
}
CLOCK_STEPS = ("clock_step", "clock_step_etcd_down")
