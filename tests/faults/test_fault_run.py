"""The randomized fault run, once over Redis and once over PostgreSQL: broker
kill -9 and restart, a consumer frozen past its lease, a storage restart, an
etcd restart and (with libfaketime installed) a broker's clock stepped ahead,
while producers and consumers run as processes. The checker must find every
promise kept (tests/faults/checker.py); the tally is printed either way.

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

from tests.faults.faults import KINDS
from tests.faults.run import fault_run

WINDOW_S = float(os.environ.get("FAULT_WINDOW_S", "30"))
KINDS_TO_RUN = os.environ.get("FAULT_KINDS", ",".join(KINDS)).split(",")
DRAIN_S = 45.0


@pytest.mark.timeout(WINDOW_S + DRAIN_S + 120)
@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_randomized_fault_run_keeps_every_promise(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = int(os.environ.get("FAULT_SEED") or random.SystemRandom().randrange(2**31))
    kinds = f"FAULT_KINDS={os.environ['FAULT_KINDS']} " if "FAULT_KINDS" in os.environ else ""
    replay = (
        f"replay: FAULT_SEED={seed} {kinds}python -m pytest "
        f"'tests/faults/test_fault_run.py::test_a_randomized_fault_run_keeps_every_promise[{backend}]'"
    )
    with capsys.disabled():
        print(f"\nfault run over {backend}, seed {seed} (journals in {tmp_path})", flush=True)
    assert set(KINDS_TO_RUN) <= set(KINDS), f"FAULT_KINDS: known kinds are {sorted(KINDS)}"
    run, report = fault_run(backend, seed, tmp_path, WINDOW_S, DRAIN_S, KINDS_TO_RUN)
    skipped = "".join(f"\nnot injected: {k} ({why})" for k, why in run.skipped.items())
    with capsys.disabled():
        print(f"{report.tally()}{skipped}\n{replay}", flush=True)
    assert not report.violations, "\n".join([*report.violations, replay])
    assert set(KINDS_TO_RUN) - set(run.skipped) <= set(report.faults), "a fault kind never ran"
