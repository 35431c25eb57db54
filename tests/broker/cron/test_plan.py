"""What one firing produces: occurrences ahead, missed ones by policy, the
schedule's window, and Debian cron's daylight-saving rules (via cronsim)."""

from __future__ import annotations

from datetime import datetime
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

import pytest

from dejaq.broker.cron.entries import LEAD_MS, SPAN_MS
from dejaq.broker.cron.plan import MAX_PER_FIRING, first_next, plan, upcoming
from dejaq.broker.cron.schedule import check, occurrences, zone
from dejaq.core.cron import CronEntry, Misfire
from dejaq.core.errors import InvalidArgument

T0 = 1_800_000_000_000  # a whole minute
MIN = 60_000
BUCHAREST = ZoneInfo("Europe/Bucharest")


def entry(schedule: str = "* * * * *", **kw: object) -> CronEntry:
    return CronEntry("t", "e", schedule, **kw)  # type: ignore[arg-type]


def local(*args: int) -> int:
    return int(datetime(*args, tzinfo=BUCHAREST).timestamp() * 1000)  # type: ignore[misc]


def test_a_firing_produces_what_falls_due_within_lead_and_span() -> None:
    f = plan(entry("*/5 * * * * *"), T0, T0 - LEAD_MS)  # fired on time
    # (from the next millisecond on: those before the cursor again, refused as duplicates)
    assert f.produce == list(range(T0 - LEAD_MS + 5_000, T0 + SPAN_MS + 1, 5_000))
    assert f.next_ms == T0 + SPAN_MS + 5_000
    assert (f.missed, f.caught_up) == (0, 0)


def test_a_firing_after_a_lost_lease_produces_from_now_on() -> None:
    # Given an entry re-leased after the broker firing it died: its due time became
    # that lease's end, 5 s later than the firing it replaces, so the cursor it
    # implies is past the occurrence that still has to be produced
    now = T0 - 5_000
    f = plan(entry(), T0 + 5_020, now)
    # Then the occurrence due in 5 s is produced (again, if the dead broker had)
    assert (f.produce, f.next_ms, f.missed) == ([T0], T0 + MIN, 0)


def test_one_firing_per_occurrence_for_a_minutely_schedule() -> None:
    f = plan(entry(), T0, T0 - LEAD_MS)
    assert (f.produce, f.next_ms) == ([T0], T0 + MIN)


def test_a_firing_is_bounded() -> None:
    f = plan(entry("* * * * * *", start_ms=0), T0, T0 + 3_600_000)
    assert len(f.produce) <= MAX_PER_FIRING + 1  # the caught-up one, and the bounded rest


@pytest.mark.parametrize(
    ("policy", "limit", "caught_up"),
    [(Misfire.SKIP, 100, []), (Misfire.ONCE, 100, [T0 + 9 * MIN]), (Misfire.ALL, 3, [7, 8, 9])],
)
def test_missed_occurrences_follow_the_misfire_policy(
    policy: Misfire, limit: int, caught_up: list[int]
) -> None:
    # Given an entry whose occurrences T0 .. T0+9min were missed (all down for 10 min)
    now = T0 + 10 * MIN - 500
    f = plan(entry(misfire=policy, misfire_limit=limit), T0, now)
    expected = [c if c > 1_000_000 else T0 + c * MIN for c in caught_up]
    assert f.missed == 10
    assert f.produce == [*expected, T0 + 10 * MIN]  # then the next one, as usual
    assert f.caught_up == len(expected)


def test_a_long_outage_is_skipped_over_without_walking_it() -> None:
    f = plan(entry("* * * * * *", misfire=Misfire.SKIP), T0, T0 + 30 * 86_400_000)
    assert f.missed >= 100_000
    assert f.produce[0] >= T0 + 30 * 86_400_000 - 1_000


def test_start_and_end_bound_the_occurrences() -> None:
    e = entry(start_ms=T0 + 2 * MIN, end_ms=T0 + 3 * MIN)
    assert first_next(e, T0) == T0 + 2 * MIN
    assert upcoming(e, T0, 10) == [T0 + 2 * MIN, T0 + 3 * MIN]
    assert plan(e, T0 + 3 * MIN + 1, T0 + 3 * MIN).next_ms == 0  # ended
    assert first_next(e, T0 + 4 * MIN) == 0


def test_spring_forward_fires_a_skipped_time_once_right_after_the_jump() -> None:
    # 2026-03-29 in Bucharest: 03:00 becomes 04:00; 03:30 does not exist that day
    times = list(islice(occurrences("30 3 * * *", BUCHAREST, local(2026, 3, 28, 12, 0)), 2))
    assert times == [local(2026, 3, 29, 4, 0), local(2026, 3, 30, 3, 30)]


def test_fall_back_fires_a_fixed_hour_once_and_a_wildcard_hour_in_both_passes() -> None:
    # 2026-10-25 in Bucharest: 04:00 becomes 03:00 again; 03:30 happens twice
    fixed = list(islice(occurrences("30 3 * * *", BUCHAREST, local(2026, 10, 24, 12, 0)), 2))
    assert fixed == [local(2026, 10, 25, 3, 30), local(2026, 10, 26, 3, 30)]
    start = local(2026, 10, 25, 2, 45)
    every30 = list(islice(occurrences("*/30 * * * *", BUCHAREST, start), 5))
    assert [b - a for a, b in pairwise(every30)] == [30 * MIN] * 4
    assert len(set(every30)) == 5  # both 03:00 and both 03:30 (one hour apart in UTC)


@pytest.mark.parametrize(
    ("expression", "where"),
    [
        ("61 * * * *", "field 1 (minute, '61' at position 1)"),
        ("0 0 31 2 *", "field 3 (day-of-month, '31' at position 5)"),
        ("0  25 * * *", "field 2 (hour, '25' at position 4)"),
        ("0 0 * * MON#6", "field 5 (day-of-week, 'MON#6' at position 9)"),
        ("70 * * * * *", "field 1 (second, '70' at position 1)"),
        ("* * *", "3 fields"),
        ("", "1-200 characters"),
    ],
)
def test_an_invalid_expression_names_the_field_and_position(expression: str, where: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        check(expression)
    assert where in str(err.value)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../../etc/passwd", " UTC"])
def test_an_unknown_time_zone_is_refused(name: str) -> None:
    with pytest.raises(InvalidArgument, match="unknown time zone"):
        zone(name)
