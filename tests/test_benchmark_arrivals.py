"""A benchmark's wait for its messages ends when all of them arrived, however
many arrived before it began: none on its way is counted as never delivered."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import ModuleType

ARRIVALS = Path(__file__).resolve().parent.parent / "benchmarks" / "suite" / "arrivals.py"


def _arrivals() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_arrivals", ARRIVALS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_wait_ends_only_once_the_last_of_its_ids_arrived() -> None:
    # Given the warm-up's ids all arrived, and one of the run's ids too
    arrivals = _arrivals().Arrivals()
    warm = ["warm-0", "warm-1"]
    for i in warm:
        arrivals.arrived(i, 1.0)
    assert await arrivals.wait_for(warm, 5) == set()
    arrivals.arrived("w0-0", 2.0)
    order: list[str] = []

    async def wait() -> set[str]:
        missing = await arrivals.wait_for(["w0-0", "w1-0"], 30)
        order.append("wait ended")
        return missing

    async def last_one() -> None:
        for _ in range(50):  # the wait's own turns of the loop, many times over
            await asyncio.sleep(0)
        order.append("w1-0 arrived")
        arrivals.arrived("w1-0", 3.0)

    # When the wait for the run's ids begins while one is still on its way
    missing, _ = await asyncio.gather(wait(), last_one())
    # Then it ends only after that one arrived, with nothing missing
    assert order == ["w1-0 arrived", "wait ended"]
    assert missing == set()
    assert arrivals.at == {"warm-0": 1.0, "warm-1": 1.0, "w0-0": 2.0, "w1-0": 3.0}


async def test_ids_that_never_arrive_are_named_when_the_time_is_up() -> None:
    # Given one id of two arrived
    arrivals = _arrivals().Arrivals()
    arrivals.arrived("a", 1.0)
    # When the wait for both runs out
    missing = await arrivals.wait_for(["a", "b"], 0.01)
    # Then the other is named missing
    assert missing == {"b"}
