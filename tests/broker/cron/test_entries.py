"""An entry's stored definition (its payload on the cron timeline) round-trips,
and one written before entries had a priority still loads, at priority 0."""

from __future__ import annotations

from dejaq.broker.cron.entries import decode, encode
from dejaq.core.cron import CronEntry, Misfire

# An entry as brokers stored it before priorities (no "priority" key).
BEFORE_PRIORITIES = (
    b'{"schedule":"0 9 * * *","timezone":"Europe/Bucharest","payload":"cA==",'
    b'"start_ms":0,"end_ms":0,"paused":false,"misfire":"skip","misfire_limit":100}'
)


def test_an_entry_round_trips_with_its_priority() -> None:
    entry = CronEntry("jobs", "daily", "0 9 * * *", "UTC", b"p", misfire=Misfire.ALL, priority=3)
    assert decode("jobs", "daily", encode(entry)) == entry


def test_an_entry_stored_before_priorities_loads_at_priority_0() -> None:
    entry = decode("reports", "daily", BEFORE_PRIORITIES)
    assert entry == CronEntry(
        "reports", "daily", "0 9 * * *", "Europe/Bucharest", b"p", misfire=Misfire.SKIP
    )
    assert entry.priority == 0
