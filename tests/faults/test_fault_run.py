"""The randomized fault run, once over Redis and once over PostgreSQL: broker
kill -9 and restart, a consumer frozen past its lease, a storage restart, an
etcd restart and (with libfaketime installed) a broker's clock stepped ahead,
with etcd up or down, while producers and consumers run as processes. The
checker must find every promise kept (tests/faults/checker.py); the tally is
printed either way. Over one SQLite file, where each broker's own clock
decides, a shorter run steps clocks only (etcd up, then etcd down): the
stepped broker's skew guard must stop it before anything goes out early.

The seed is drawn anew each run and printed; ``FAULT_SEED=N`` replays its
plan (the faults, their targets and durations, the messages' due times; the
interleaving with the processes is the machine's). ``FAULT_WINDOW_S``
lengthens the run for a longer hunt (default 30 s a backend); ``FAULT_KINDS``
(comma-separated, default all) picks the kinds of fault."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.faults.faults import CLOCK_STEPS, KINDS
from tests.faults.journal import read_all
from tests.faults.run import fault_run
from tests.servers import require_binary

WINDOW_S = float(os.environ.get("FAULT_WINDOW_S", "30"))
KINDS_TO_RUN = os.environ.get("FAULT_KINDS", ",".join(KINDS)).split(",")
DRAIN_S = 45.0
EMBEDDED_WINDOW_S = 6.0  # one step or two: each lasts 4-6 s
GUARD_STOPPED = "dispatch stopped"  # the skew guard's log line when it stops a broker


@pytest.mark.timeout(WINDOW_S + DRAIN_S + 120)
@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_randomized_fault_run_keeps_every_promise(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    test = f"test_a_randomized_fault_run_keeps_every_promise[{backend}]"
    seed, replay = _seed(test, capsys, f"over {backend}", tmp_path)
    assert set(KINDS_TO_RUN) <= set(KINDS), f"FAULT_KINDS: known kinds are {sorted(KINDS)}"
    run, report = fault_run(backend, seed, tmp_path, WINDOW_S, DRAIN_S, KINDS_TO_RUN)
    skipped = "".join(f"\nnot injected: {k} ({why})" for k, why in run.skipped.items())
    with capsys.disabled():
        print(f"{report.tally()}{skipped}\n{replay}", flush=True)
    assert not report.violations, "\n".join([*report.violations, replay])
    assert set(KINDS_TO_RUN) - set(run.skipped) <= set(report.faults), "a fault kind never ran"


@pytest.mark.timeout(EMBEDDED_WINDOW_S + DRAIN_S + 120)
@pytest.mark.parametrize("kind", CLOCK_STEPS)
def test_on_sqlite_a_clock_step_stops_the_broker_before_anything_is_early(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given three brokers of a cluster on one SQLite file, under libfaketime
    require_binary("faketime")
    test = f"test_on_sqlite_a_clock_step_stops_the_broker_before_anything_is_early[{kind}]"
    seed, replay = _seed(test, capsys, f"over sqlite ({kind})", tmp_path)
    # When a broker's wall clock steps 500 ms ahead, its monotonic clock running on
    run, report = fault_run("sqlite", seed, tmp_path, EMBEDDED_WINDOW_S, DRAIN_S, [kind])
    with capsys.disabled():
        print(f"{report.tally()}\n{replay}", flush=True)
    assert report.faults[kind] >= 1
    # Then nothing was delivered early, and every promise held
    assert not report.early, "\n".join([*report.violations, replay])
    assert not report.violations, "\n".join([*report.violations, replay])
    # and each stepped broker's guard did stop it (the step was seen)
    stepped = {r["target"] for r in read_all(tmp_path, "harness.jsonl") if r["k"] == "fault"}
    for broker in run.brokers:
        if broker.address in stepped:
            assert GUARD_STOPPED in broker.log.read_text(errors="replace"), broker.name


def _seed(
    test: str, capsys: pytest.CaptureFixture[str], what: str, folder: Path
) -> tuple[int, str]:
    """The run's seed (drawn, or ``FAULT_SEED``), printed; and how to replay it."""
    seed = int(os.environ.get("FAULT_SEED") or random.SystemRandom().randrange(2**31))
    kinds = f"FAULT_KINDS={os.environ['FAULT_KINDS']} " if "FAULT_KINDS" in os.environ else ""
    replay = (
        f"replay: FAULT_SEED={seed} {kinds}python -m pytest "
        f"'tests/faults/test_fault_run.py::{test}'"
    )
    with capsys.disabled():
        print(f"\nfault run {what}, seed {seed} (journals in {folder})", flush=True)
    return seed, replay
